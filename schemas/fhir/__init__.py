"""FHIR R4 at the edges of UaC: resources in (`mapping`), DetectedIssue alerts out
(`detected_issue`). Pure: JSON text and dicts in, events and dicts out; files are read by
`streams.fhir_files`."""
