"""The embedding facade."""
