"""pdbq.graph"""
