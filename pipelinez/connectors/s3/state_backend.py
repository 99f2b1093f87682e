"""The S3 state backend (`state: {backend: s3, url: s3://bucket/prefix, connection: {...}}`): the shared
object-store backend (`files.objstate`) over S3's signed REST calls. `connection` holds the s3 connector's
connection keys without `bucket` (the url's): endpoint, region, url_style, use_ssl, access_key_id,
secret_access_key, session_token."""

from __future__ import annotations

from typing import Any

from pipelinez.connectors.files.objstate import ObjectStateBackend, StateObjects
from pipelinez.connectors.s3.place import S3Place


class S3StateBackend(ObjectStateBackend):
    place: S3Place
    name = "s3"
    scheme = "s3"

    def make_objects(self, root: str, connection: dict[str, Any]) -> StateObjects:
        self.place = S3Place.of(connection)
        return self.place.rest(root)

    def where(self) -> str:
        return self.place.where()
