"""Drug knowledge layer: resolves drugs and allergens and judges cross-reactivity.

`model` holds the interface (`DrugKnowledge`); `bundled` implements it from the versioned,
cited data files in `data/`; `report` renders one judgement as JSON-ready data.
"""
