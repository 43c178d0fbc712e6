"""The names of the FHIR resource types, to tell a resource UaC does not import (an
Observation: skipped) from a `resourceType` that names no FHIR resource (a typo, a name of an
earlier release: an error, since what it holds may be an allergy or an order). Pure data.
"""

from __future__ import annotations

from typing import Final

_R4_NAMES: Final = """
    Account ActivityDefinition AdverseEvent AllergyIntolerance Appointment AppointmentResponse
    AuditEvent Basic Binary BiologicallyDerivedProduct BodyStructure Bundle CapabilityStatement
    CarePlan CareTeam CatalogEntry ChargeItem ChargeItemDefinition Claim ClaimResponse
    ClinicalImpression CodeSystem Communication CommunicationRequest CompartmentDefinition
    Composition ConceptMap Condition Consent Contract Coverage CoverageEligibilityRequest
    CoverageEligibilityResponse DetectedIssue Device DeviceDefinition DeviceMetric DeviceRequest
    DeviceUseStatement DiagnosticReport DocumentManifest DocumentReference EffectEvidenceSynthesis
    Encounter Endpoint EnrollmentRequest EnrollmentResponse EpisodeOfCare EventDefinition Evidence
    EvidenceVariable ExampleScenario ExplanationOfBenefit FamilyMemberHistory Flag Goal
    GraphDefinition Group GuidanceResponse HealthcareService ImagingStudy Immunization
    ImmunizationEvaluation ImmunizationRecommendation ImplementationGuide InsurancePlan Invoice
    Library Linkage List Location Measure MeasureReport Media Medication MedicationAdministration
    MedicationDispense MedicationKnowledge MedicationRequest MedicationStatement MedicinalProduct
    MedicinalProductAuthorization MedicinalProductContraindication MedicinalProductIndication
    MedicinalProductIngredient MedicinalProductInteraction MedicinalProductManufactured
    MedicinalProductPackaged MedicinalProductPharmaceutical MedicinalProductUndesirableEffect
    MessageDefinition MessageHeader MolecularSequence NamingSystem NutritionOrder Observation
    ObservationDefinition OperationDefinition OperationOutcome Organization
    OrganizationAffiliation Parameters Patient PaymentNotice PaymentReconciliation Person
    PlanDefinition Practitioner PractitionerRole Procedure Provenance Questionnaire
    QuestionnaireResponse RelatedPerson RequestGroup ResearchDefinition ResearchElementDefinition
    ResearchStudy ResearchSubject RiskAssessment RiskEvidenceSynthesis Schedule SearchParameter
    ServiceRequest Slot Specimen SpecimenDefinition StructureDefinition StructureMap Subscription
    Substance SubstanceNucleicAcid SubstancePolymer SubstanceProtein
    SubstanceReferenceInformation SubstanceSourceMaterial SubstanceSpecification SupplyDelivery
    SupplyRequest Task TerminologyCapabilities TestReport TestScript ValueSet VerificationResult
    VisionPrescription
    """
R4_RESOURCE_TYPES: Final = frozenset(_R4_NAMES.split())
"""The 146 resource types of FHIR R4 (4.0.1), as the specification lists them
(https://hl7.org/fhir/R4/resourcelist.html)."""

_LATER_NAMES: Final = """
    ActorDefinition AdministrableProductDefinition ArtifactAssessment
    BiologicallyDerivedProductDispense Citation ClinicalUseDefinition ConditionDefinition
    DeviceDispense DeviceUsage EncounterHistory EvidenceReport FormularyItem GenomicStudy
    ImagingSelection Ingredient InventoryItem InventoryReport ManufacturedItemDefinition
    MedicinalProductDefinition NutritionIntake NutritionProduct PackagedProductDefinition
    Permission RegulatedAuthorization RequestOrchestration Requirements SubscriptionStatus
    SubscriptionTopic SubstanceDefinition TestPlan Transport
    """
LATER_RESOURCE_TYPES: Final = frozenset(_LATER_NAMES.split())
"""The resource types that FHIR R4B (4.3.0) and R5 (5.0.0) added to R4's
(https://hl7.org/fhir/R4B/resourcelist.html, https://hl7.org/fhir/R5/resourcelist.html): real
resources of a later release, which an R4 export mixed with newer data may hold. None of them
is a record UaC imports."""

RENAMED_TYPES: Final = {"MedicationOrder": "MedicationRequest"}
"""Resource types of an earlier release (DSTU2) that R4 holds under another name, for the
types UaC imports."""

_CLOSE: Final = 2
"""The most letters a resourceType may differ by from a resource type it is taken to mean."""


def meant_type(written: str, preferred: frozenset[str]) -> str | None:
    """The R4 resource type a `resourceType` that is none most likely means: one it differs from
    only in case and spaces, else one at most `_CLOSE` letters away (added, dropped or changed),
    the nearest, of `preferred` (the types imported) before the others, then by name; None
    when no type is that close."""
    if written in RENAMED_TYPES:
        return RENAMED_TYPES[written]
    ranked = sorted(
        (_edits(folded(written), known.casefold()), known not in preferred, known)
        for known in R4_RESOURCE_TYPES
    )
    distance, _, known = ranked[0]
    return known if distance <= _CLOSE else None


def folded(resource_type: str) -> str:
    """A resource type name as compared for a likely meaning: without spaces, case-folded."""
    return "".join(resource_type.split()).casefold()


def _edits(first: str, second: str) -> int:
    """The Levenshtein distance: how many letters added, dropped or changed make one the other."""
    previous = list(range(len(second) + 1))
    for row, letter in enumerate(first, start=1):
        current = [row]
        for column, other in enumerate(second, start=1):
            current.append(
                min(
                    previous[column] + 1,
                    current[column - 1] + 1,
                    previous[column - 1] + (letter != other),
                )
            )
        previous = current
    return previous[-1]
