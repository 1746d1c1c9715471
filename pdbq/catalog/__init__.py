"""pdbq.catalog"""
