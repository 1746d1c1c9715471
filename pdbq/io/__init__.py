"""pdbq.io"""
