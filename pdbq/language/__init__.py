"""The pdbq SQL dialect: parsing scripts into typed statement nodes."""
