"""kafkite.spark"""
