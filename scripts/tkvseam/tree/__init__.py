"""The trees tkv-seam makes (build trees and port trees): ``seamtree.SeamTree`` owns each one's
lock, state (``state``), crash recovery, what counts as the user's work (``work``) and what is
kept when something is dropped (``kept``); ``switch`` moves a build tree in place; ``commits``
makes a queue's commits with plumbing only, ``export`` turns a tree's commits back into patch texts. A port tree's mechanics: ``porttree`` (one trial of a
patch: strict, 3-way, offset with full context), ``importmerge`` (import-only conflicts merged)
and ``replay`` (recorded resolutions, git rerere, shared by a project's ports)."""
