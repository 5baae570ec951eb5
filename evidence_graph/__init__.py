"""Evidence graph: the transaction graph behind one GraphStore interface (embedded networkx or
Neo4j), multi-hop evidence traces, graph features and laundering typologies."""
