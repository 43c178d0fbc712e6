"""The error a knowledge backend raises for its data."""


class KnowledgeDataError(ValueError):
    """A bundled data file is missing, malformed, inconsistent or not in the manifest."""
