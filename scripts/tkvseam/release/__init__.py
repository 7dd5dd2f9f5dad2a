"""Following upstream releases: ``pin`` a release, ``watch`` for newer ones, ``carry`` one end to
end (pin, ``seamtable``, ``cpulock``, the port), ``retire`` a base no longer carried."""
