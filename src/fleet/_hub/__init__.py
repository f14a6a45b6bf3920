"""One fleet across many hosts, on NATS JetStream.

Each host's journals stay the source of truth. ``fleet ship`` (:mod:`fleet._hub.ship`) tails them
into a JetStream stream, one subject per worker, and answers remote actions on its own host;
coordinators read the hub (:mod:`fleet._hub.view`) with the same fold and the same waiting as a
local fleet, with host-qualified worker ids and marks (``host/worker``), an explicit ``offline``
state for the workers of a host that stopped shipping, and seen marks kept in the hub.

Nothing here is imported by ``import fleet``: the NATS client (``nats-py``, the ``hub`` extra) is
imported only by the modules that talk to a server.
"""
