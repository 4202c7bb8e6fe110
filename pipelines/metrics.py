"""The one namespace of ddb2bt's Beam counters (the reconciliation reads them back from it)."""

NAMESPACE = "ddb2bt"
