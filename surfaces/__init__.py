"""What people and bots talk to: the JSON API, MCP, the search page, the viewer and the admin console.

The only package whose modules see requests; everything under it calls the engine, access and the corpus.
"""
