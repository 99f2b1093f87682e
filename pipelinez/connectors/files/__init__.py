"""The file-format kit of the connector SDK: what every file-like connector (`localfiles`, `s3`, `azureblob`)
shares, so that a format option means the same on each of them.

- `formats`: formats and their names (`orders.csv.gz` is csv), globs, the dataset/output option rules;
- `store`: `FileRef` (one file: how messages name it, what DuckDB reads, how to open it) and `FileStore`
  (where a connector's files live: list a path, a prefix or a glob);
- `csvformat`, `jsondepth`, `finite`: CSV dialect and schema, JSON nesting guard, JSON's NaN/Infinity rule;
- `jsonread`: JSON schema inference and reads (also used by the `http` connector for responses);
- `reading`: a dataset's files, partitions, schema and native SELECT;
- `writing`: an output as a folder (or prefix) of data files: replace and append, both tiers;
- `objects`: S3-compatible and Azure object stores (pyarrow file systems for listing and promotion,
  DuckDB's extensions for the data).
"""
