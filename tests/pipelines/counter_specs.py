"""The counters' spec the counter tests share: the seed's videos with likes and views in an aggregate family."""

from ddb2bt.mappers.spec import MappingSpec

MIGRATION_US = 1_704_067_200_000_000  # the spec's migration_time, 2024-01-01T00:00:00Z


def counter_spec(table: str, endpoint: str) -> MappingSpec:
    """The seed's videos: a video row holds its title, and its likes and views (DynamoDB items of their own) as
    counters in an aggregate family."""
    return MappingSpec.model_validate({
        "source": {"table": table, "endpoint_url": endpoint, "region": "us-east-1", "partition_key": "pk",
                   "sort_key": "sk"},
        "target": {"table": table, "families": {"video": None, "stats": {"aggregate": "sum"}}},
        "migration_time": "2024-01-01T00:00:00Z",
        "entities": [
            {"name": "video", "match": {"sk": "Video"}, "row_key": "{pk}", "drop": ["sk"],
             "columns": [{"attribute": "Title", "family": "video", "encoding": "utf8"}]},
            {"name": "likes", "match": {"sk": "VideoStatsLikes"}, "row_key": "{pk}", "drop": ["sk"],
             "columns": [{"attribute": "Count", "family": "stats", "qualifier": "Likes", "encoding": "int64"}]},
            {"name": "views", "match": {"sk": "VideoStatsViews"}, "row_key": "{pk}", "drop": ["sk"],
             "columns": [{"attribute": "Count", "family": "stats", "qualifier": "Views", "encoding": "int64"}]},
        ],
    })
