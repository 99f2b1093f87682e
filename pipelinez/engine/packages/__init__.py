"""`pz restore`: installing the connector packages project.yml pins and writing `pz.lock`."""
