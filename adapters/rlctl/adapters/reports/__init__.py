"""Reports of runs: reading a run folder, and drawing its report as HTML (inline SVG) and PNG."""
