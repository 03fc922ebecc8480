"""kafkite.coordinator"""
