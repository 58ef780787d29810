"""The dataset viewer: a local web page (served, or written as static files) over a dataset."""
