"""kafkite.testing"""
