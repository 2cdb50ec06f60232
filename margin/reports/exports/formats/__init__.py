"""One module per export format, named as `--format` names it: its `render(bundle) -> str` and
`holds(text) -> str` (what the file holds, read back from it). A module here is a format:
`margin.reports.exports.EXPORTERS` lists them from this folder, without importing them."""
