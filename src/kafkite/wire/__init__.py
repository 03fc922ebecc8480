"""kafkite.wire"""
