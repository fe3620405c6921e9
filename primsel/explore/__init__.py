"""The run explorer: a static site to browse an experiment directory (``primsel explore``)."""
