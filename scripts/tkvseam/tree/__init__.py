"""The trees tkv-seam makes (build trees and port trees): ``seamtree.SeamTree`` owns each one's
lock, state (``state``), crash recovery, what counts as the user's work and what is kept when
something is dropped (``checkouts``, ``kept``); ``commits`` makes a queue's commits with plumbing
only."""
