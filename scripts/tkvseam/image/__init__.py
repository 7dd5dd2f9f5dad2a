"""The Docker overlay image: ``build`` (the official image plus the overlay and the plugin: the
checks, the context, the labels), the docker SDK through ``engine`` (the client, the build's run in
the engine, the push), its names and labels (``names``), a local stand-in for the official image
(``standin``), the plugin's wheel (``wheel``) and its installer run inside the image
(``plugin_install``, standard library only)."""
