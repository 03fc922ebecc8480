"""kafkite.controller"""
