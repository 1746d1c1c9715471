"""pdbq.answers"""
