"""pdbq.api"""
