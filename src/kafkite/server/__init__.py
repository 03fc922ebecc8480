"""kafkite.server"""
