"""kafkite.storage"""
