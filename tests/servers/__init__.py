"""The tests' own servers, on 127.0.0.1 only: peers the emulator cannot play.

- ``http``: a scripted HTTP/1.1 server on raw sockets (identity provider and API in one), whose
  answers may be anything a well-behaved server never sends;
- ``ws``: raw WebSocket peers (frames, upgrades, a peer that keeps its connections) and the
  helpers that drive a subscription against them;
- ``schema``: servers that answer the introspection with a given schema (or execute documents
  with graphql-core);
- ``variant``: a GraphQL server whose schema differs from the emulator's, as production's does.
"""
