"""The items parity and the redrive read now (``read_items``: BatchGetItem, consistent) against moto_server: keys
DynamoDB leaves unprocessed (throttling) are asked again until every item is answered; a deleted item is missing."""

from __future__ import annotations

import json
from typing import Any

from ddb2bt.mappers.attrvalue import to_export_json
from ddb2bt.pipelines.cutover import parity
from ddb2bt.pipelines.cutover.workload import create_streamed_table


class Throttling:
    """A real client whose first two answers leave all but one of the asked keys unprocessed, as DynamoDB does."""

    def __init__(self, client: Any) -> None:
        self.client, self.asked, self.throttled = client, [], 2

    def batch_get_item(self, RequestItems: dict) -> dict:
        (table, request), = RequestItems.items()
        self.asked.append(len(request["Keys"]))
        assert request["ConsistentRead"] is True
        if self.throttled and len(request["Keys"]) > 1:
            self.throttled -= 1
            answer = self.client.batch_get_item(RequestItems={table: {**request, "Keys": request["Keys"][:1]}})
            return {**answer, "UnprocessedKeys": {table: {**request, "Keys": request["Keys"][1:]}}}
        return self.client.batch_get_item(RequestItems=RequestItems)


def test_unprocessed_keys_are_asked_again_until_every_item_is_read(moto_server, unique_name, monkeypatch):
    monkeypatch.setattr(parity, "UNPROCESSED_PAUSE_S", 0.0)
    client = create_streamed_table(moto_server.endpoint, unique_name)
    items = [{"pk": {"S": f"p{i}"}, "sk": {"S": "post"}, "B": {"B": bytes([i, 0, 255])}} for i in range(130)]
    for item in items:
        client.put_item(TableName=unique_name, Item=item)
    keys = [to_export_json({"pk": item["pk"], "sk": item["sk"]}) for item in items]
    keys.append({"pk": {"S": "gone"}, "sk": {"S": "post"}})
    throttling = Throttling(client)
    found = parity.read_items(throttling, unique_name, keys)
    assert throttling.asked == [100, 99, 98, 31]  # 100 a request; what was left unprocessed asked again
    assert sorted(found) == sorted(json.dumps(key, sort_keys=True) for key in keys[:-1])  # "gone" is missing
    assert all(found[json.dumps(to_export_json({"pk": i["pk"], "sk": i["sk"]}), sort_keys=True)] == i for i in items)
