"""pdbq.grounding"""
