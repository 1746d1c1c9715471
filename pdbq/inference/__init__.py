"""pdbq.inference"""
