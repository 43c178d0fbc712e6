"""Reading FHIR JSON documents (a Bundle of any type, a single resource, bulk-export NDJSON)
into `SourcedResource`s that remember where they came from (`file.ndjson:12`,
`bundle.json#entry[3]`). Pure: the caller reads the files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from itertools import chain
from typing import Final, NamedTuple
from urllib.parse import parse_qs

from schemas.errors import MalformedJson
from schemas.fhir.json_access import (
    Json,
    Problem,
    parse_fhir_datetime,
    relative_reference,
    text_among,
    unversioned_parts,
)
from schemas.fhir.local_times import in_zone
from schemas.fhir.modifiers import Modifier, bundle_modifier, entry_modifier, refusal
from schemas.json_lines import NotUtf8, strict_json, where_json_fails

CLAIM_TYPES: Final = frozenset(
    {
        "AllergyIntolerance",
        "MedicationRequest",
        "MedicationStatement",
        "MedicationAdministration",
        "MedicationDispense",
        "Immunization",
        "Patient",
    }
)
"""The resource types whose versions become claims: a deletion of one cannot be skipped."""
REFUSED_UNDER_MODIFIER: Final = CLAIM_TYPES | {"Medication", "Substance"}
"""The resource types that a modifier of their Bundle entry, or of their Bundle, refuses: those
read (a claim, or a Medication or Substance a claim's drug is read from); a resource of
another type is skipped unread anyway."""


@dataclass(frozen=True)
class SourcedResource:
    """One FHIR resource and where it came from; `full_url` is its Bundle entry's fullUrl,
    `document_time` the time of the Bundle it came in (see `bundle_time`)."""

    origin: str
    resource: Json
    full_url: str | None = None
    document_time: datetime | None = None
    conditional: str | None = None
    """The business identifier (`system|value`) a transaction entry's conditional create or
    update names the resource by, if it does (see `conditional_identifier`)."""
    request_url: str | None = None
    """The url of a batch or transaction entry's `PUT` request (`Type/id` or a conditional
    `Type?...`), if it has one."""

    @property
    def resource_type(self) -> str:
        return str(self.resource["resourceType"])

    @property
    def identity(self) -> str | None:
        """The resource's id; without one, the business identifier a conditional create or
        update names it by (each message of an interface engine gives the same record a fresh
        `urn:uuid`, the identifier stays), else the id its Bundle entry's fullUrl gives it (the
        uuid of `urn:uuid:<uuid>`, the oid of `urn:oid:<oid>`, or `<id>` of a URL ending in
        `<resourceType>/<id>`), as document and transaction Bundles identify new resources."""
        identifier = self.resource.get("id")
        if isinstance(identifier, str) and identifier.strip():
            return identifier
        return self.conditional or _id_in_full_url(self.full_url, self.resource_type)

    @property
    def identity_conflict(self) -> str | None:
        """Why the resource's own `id` and the id its entry names it by (a fullUrl ending in
        `<Type>/<id>`, a `PUT <Type>/<id>` request) cannot both be its identity, when they name
        different resources: importing it under either id could file it as another record, or
        under another patient."""
        own = self.resource.get("id")
        if not isinstance(own, str) or not own.strip():
            return None
        itself = f"{self.resource_type}/{own}"
        for where, url in (("fullUrl", self.full_url), ("request.url (PUT)", self.request_url)):
            named = _type_and_id_named(url)
            if named is not None and named != itself:
                return (
                    f"its Bundle entry's {where} {url!r} names {named}, but the resource is "
                    f"{itself}: which id is the record's cannot be told, so it is imported "
                    "under neither"
                )
        return None

    @property
    def server_base(self) -> str | None:
        """The base of the server the resource is from, when its entry's fullUrl is a URL
        ending in `<resourceType>/<id>` (see `server_base_of`)."""
        if self.full_url is None or self.identity is None:
            return None
        base, relative = _split_absolute(self.full_url)
        return base if relative == f"{self.resource_type}/{self.identity}" else None


def server_base_of(reference: str, base: str | None) -> str | None:
    """The base of the server a literal reference names a resource on: an absolute URL's own
    (`https://hospA.example/fhir/Patient/1` is on `hospa.example/fhir`), a relative reference's
    that of the resource it is written in (FHIR resolves `Patient/1` in a Bundle entry against
    the base of the entry's fullUrl); None when unknown. Bases are compared without their
    scheme, host in lower case, without the default port of the scheme and without a trailing
    `/`: `http://` and `https://` name one server, and so do `h.example` and `h.example:80`."""
    absolute_base, _ = _split_absolute(reference)
    if absolute_base is not None:
        return absolute_base
    return base if relative_reference(reference) is not None and ":" not in reference else None


def located(reference: str, base: str | None) -> str | None:
    """`<server base>/<Type>/<id>` of the resource a literal reference names, when the server
    is known (see `server_base_of`): what tells apart two servers' resources of one id."""
    server = server_base_of(reference, base)
    relative = relative_reference(reference.split("#", 1)[0])
    return None if server is None or relative is None else f"{server}/{relative}"


def _split_absolute(url: str) -> tuple[str | None, str | None]:
    """The normalized server base and `Type/id` of an absolute http(s) reference or fullUrl
    (a version suffix is dropped), else (None, None)."""
    scheme, marker, rest = url.strip().partition("://")
    default_port = _DEFAULT_PORTS.get(scheme.lower())
    if not marker or default_port is None:
        return None, None
    parts = unversioned_parts(rest.split("?", 1)[0].split("#", 1)[0])
    if len(parts) < _HOST_TYPE_AND_ID:
        return None, None
    base = "/".join([_server_host(parts[0], default_port), *parts[1:-2]])
    return base, f"{parts[-2]}/{parts[-1]}"


_HOST_TYPE_AND_ID: Final = 3
_DEFAULT_PORTS: Final = {"http": "80", "https": "443"}


def _server_host(authority: str, default_port: str) -> str:
    """The host (and port) of a URL as servers are compared: in lower case, and without the
    scheme's default port or an empty one (RFC 3986, 6.2.3: `h.example:80/fhir` over http is
    `h.example/fhir`); another port names another server."""
    host, colon, port = authority.lower().rpartition(":")
    default = colon and (not port or port.lstrip("0") == default_port)
    return host if default else authority.lower()


def _type_and_id_named(url: str | None) -> str | None:
    """`Type/id` of a fullUrl or request url that names a resource by its type and id (an
    http(s) URL or a relative `Type/id`, a version suffix dropped); None for a `urn:` or a
    conditional (`Type?...`) one, which names no id."""
    if url is None or url.strip().lower().startswith("urn:") or "?" in url:
        return None
    _, relative = _split_absolute(url)
    if relative is None and "://" not in url:
        relative = relative_reference(url.split("#", 1)[0])
    return relative


def _id_in_full_url(full_url: str | None, resource_type: str) -> str | None:
    if full_url is None:
        return None
    full_url = reference_key(full_url)
    for prefix in ("urn:uuid:", "urn:oid:"):
        if full_url.startswith(prefix):
            return full_url.removeprefix(prefix).strip() or None
    relative = relative_reference(full_url)
    if relative is None or relative.split("/")[0] != resource_type:
        return None
    return relative.split("/")[1]


@dataclass(frozen=True)
class Skipped:
    """A well-formed input that deliberately yields no event, and why."""

    origin: str
    resource_type: str
    resource_id: str | None
    reason: str


@dataclass(frozen=True)
class FhirError:
    """An input that should have been mapped but could not be (same fields as a line error)."""

    origin: str
    reason: str
    message: str


@dataclass(frozen=True)
class PassedOver:
    """An optional part of a record that could not be read: the record was imported without
    it (see `sources.optional_part`)."""

    origin: str
    source_ref: str
    """The record, `ResourceType/id`."""
    detail: str

    @property
    def message(self) -> str:
        return f"{self.source_ref}: {self.detail}"


@dataclass(frozen=True)
class SearchPage:
    """A page of search results: a Bundle with a `link` of relation `self` or `next`."""

    origin: str
    bundle_id: str | None
    url: str | None
    next_url: str | None


@dataclass(frozen=True)
class ParsedInput:
    """Resources read from one or more JSON documents, with what reading already rejected."""

    resources: tuple[SourcedResource, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    errors: tuple[FhirError, ...] = ()
    pages: tuple[SearchPage, ...] = ()


def combine(parts: Iterable[ParsedInput]) -> ParsedInput:
    collected = list(parts)
    return ParsedInput(
        resources=tuple(r for part in collected for r in part.resources),
        skipped=tuple(s for part in collected for s in part.skipped),
        errors=tuple(e for part in collected for e in part.errors),
        pages=tuple(page for part in collected for page in part.pages),
    )


def parse_json_document(text: str, source: str, local_zone: tzinfo | None = None) -> ParsedInput:
    """The resources of one JSON document (a Bundle is unpacked, nested Bundles too); times
    without a zone are read in `local_zone` if one is given (see `in_zone`)."""
    if not text.strip():
        return ParsedInput(errors=(_malformed(source, "the file is empty"),))
    return _parsed_json(text, source, _document_problem, local_zone)


def _parsed_json(
    text: str,
    origin: str,
    problem: Callable[[json.JSONDecodeError], str],
    local_zone: tzinfo | None,
) -> ParsedInput:
    try:
        document = strict_json(text)
    except json.JSONDecodeError as error:
        return ParsedInput(errors=(_malformed(origin, problem(error)),))
    except MalformedJson as error:
        return ParsedInput(errors=(_malformed(origin, str(error)),))
    return unpack(document if local_zone is None else in_zone(document, local_zone), origin)


def _malformed(origin: str, message: str) -> FhirError:
    return FhirError(origin, Problem.MALFORMED_JSON.value, message)


def _document_problem(error: json.JSONDecodeError) -> str:
    """Why a document is not one JSON value, and what it most likely is instead."""
    where = where_json_fails(error)
    if error.doc.lstrip().startswith("<"):
        return f"{where} (this looks like FHIR XML: only FHIR JSON is read; convert it first)"
    if error.msg != "Extra data":
        return where
    return _after_the_value(error) or (
        f"{where} (more than one JSON value: a bulk export, one resource per line, is read "
        "from a .ndjson file)"
    )


def _line_problem(error: json.JSONDecodeError) -> str:
    """Why a line of a bulk export is not one JSON value, and what it most likely holds."""
    where = where_json_fails(error)
    if error.msg != "Extra data":
        return where
    if error.doc[error.pos :].strip() == ",":
        return (
            f"{where} (the line ends with a ',': the lines of a .ndjson file are not separated "
            "by commas)"
        )
    before = error.doc[: error.pos]
    if "\r" in before[len(before.rstrip()) :]:
        return (
            f"{where} (more than one JSON value on the line, separated by a carriage return "
            "(CR) alone: the lines of a .ndjson file end with LF or CR LF)"
        )
    return _after_the_value(error) or (
        f"{where} (more than one JSON value on the line: one resource per line)"
    )


def _after_the_value(error: json.JSONDecodeError) -> str | None:
    """What is wrong with a text whose JSON value is complete but followed by characters that
    start no other JSON value (NUL padding, a stray `}`, the end of a longer file written
    over), and where they start; None when what follows may be another value."""
    rest = error.doc[error.pos :].rstrip()
    following = rest.lstrip(", \t\r\n")
    if following[:1] and following[0] in _VALUE_STARTS:
        return None
    if not rest.strip("\x00"):
        what = f"{len(rest)} NUL character(s) (U+0000)"
    else:
        shown = rest[:_SHOWN_TRAILING]
        more = "..." if len(rest) > _SHOWN_TRAILING else ""
        what = f"{len(rest)} character(s) that are not JSON ({shown!r}{more})"
    one_line = "\n" not in error.doc.rstrip("\r\n")
    where = f"column {error.colno}" if one_line else f"line {error.lineno} column {error.colno}"
    return (
        f"not JSON: {what} follow the complete JSON value, at {where} (character offset "
        f"{error.pos}): nothing may follow the value (padding, or the end of a longer file "
        "written over?); remove the trailing characters"
    )


_VALUE_STARTS: Final = frozenset('{["-0123456789tfn')
"""The characters a JSON value can start with: what follows a value and starts with one of
them may be another value (a bulk export in a .json file)."""
_SHOWN_TRAILING: Final = 20


_PRETTY_PRINTED: Final = (
    "this looks like one JSON document over several lines (pretty-printed): a .ndjson file "
    "holds one resource per line; name the file .json to read it as one document"
)


def parse_ndjson(
    lines: Iterable[str | NotUtf8],
    source: str,
    each: Callable[[ParsedInput], ParsedInput] | None = None,
    local_zone: tzinfo | None = None,
) -> ParsedInput:
    """Bulk-export NDJSON: one resource per line, origins `source:<line number>`; a line that
    is not UTF-8 is an error of its own. `each` is applied to every line as it is read (to
    keep only what will be mapped, instead of holding a whole export in memory); times without
    a zone are read in `local_zone` if one is given (see `in_zone`)."""
    numbered = (
        (number, line)
        for number, line in enumerate(lines, start=1)
        if isinstance(line, NotUtf8) or line.strip()
    )
    first = next(numbered, None)
    if first is None:
        return ParsedInput()
    if isinstance(first[1], str) and first[1].strip() in ("{", "["):
        return ParsedInput(errors=(_malformed(f"{source}:{first[0]}", _PRETTY_PRINTED),))
    parsed = (
        _parsed_line(line, f"{source}:{number}", local_zone)
        for number, line in chain((first,), numbered)
    )
    return combine(parsed if each is None else map(each, parsed))


def _parsed_line(line: str | NotUtf8, origin: str, local_zone: tzinfo | None) -> ParsedInput:
    if isinstance(line, NotUtf8):
        return ParsedInput(errors=(_malformed(origin, line.message),))
    return _parsed_json(line, origin, _line_problem, local_zone)


def unpack(
    document: object,
    origin: str,
    full_url: str | None = None,
    document_time: datetime | None = None,
    conditional: str | None = None,
    request_url: str | None = None,
    modified_by: Modifier | None = None,
) -> ParsedInput:
    """One parsed JSON value as resources: a Bundle's entries, or the resource itself.
    `modified_by` is a modifier of the Bundle entry or Bundle it came in, which refuses it
    when it is of a type that is read (`REFUSED_UNDER_MODIFIER`)."""
    if not isinstance(document, Mapping) or not isinstance(document.get("resourceType"), str):
        message = "expected a FHIR resource: a JSON object with a resourceType"
        if isinstance(document, list):
            message += (
                f" (this is a JSON array of {len(document)} value(s): put the resources in a "
                "Bundle of type collection, or write one per line in a .ndjson file)"
            )
        return ParsedInput(errors=(FhirError(origin, Problem.NOT_A_RESOURCE.value, message),))
    if document["resourceType"] == "Bundle":
        time = bundle_time(document) or document_time
        entries = _bundle_entries(document, origin, time, modified_by or bundle_modifier(document))
        return combine((entries, _more_pages(document, origin)))
    resource = SourcedResource(origin, document, full_url, document_time, conditional, request_url)
    if modified_by is not None and resource.resource_type in REFUSED_UNDER_MODIFIER:
        label = "/".join(filter(None, (resource.resource_type, resource.identity)))
        message = f"{label}: {refusal(modified_by).message}"
        return ParsedInput(
            errors=(FhirError(origin, Problem.MODIFIER_NOT_UNDERSTOOD.value, message),)
        )
    return ParsedInput(resources=(resource,))


def _more_pages(bundle: Json, origin: str) -> ParsedInput:
    """The page of search results this Bundle is, if it links to itself or a next page; a
    link that cannot be read is a notice, since it may be the next page's."""
    identifier = bundle.get("id")
    identifier = identifier if isinstance(identifier, str) else None
    links, unreadable = _links(bundle.get("link", []))
    notices = tuple(
        Skipped(origin, "Bundle", identifier, _unreadable_link(problem)) for problem in unreadable
    )
    if "self" not in links and "next" not in links:
        return ParsedInput(skipped=notices)
    page = SearchPage(origin, identifier, links.get("self"), links.get("next"))
    return ParsedInput(skipped=notices, pages=(page,))


def _links(listed: object) -> tuple[dict[str, str], list[str]]:
    """A Bundle's links, the url of each relation (the first link of a relation holds), and
    what could not be read, by path."""
    if not isinstance(listed, list):
        return {}, ["link is not a list"]
    links: dict[str, str] = {}
    unreadable: list[str] = []
    for position, link in enumerate(listed):
        path = f"link[{position}]"
        if not isinstance(link, Mapping):
            unreadable.append(f"{path} is not a JSON object")
        elif not isinstance(relation := link.get("relation"), str):
            unreadable.append(f"{path}.relation is not a string")
        elif not isinstance(url := link.get("url"), str):
            unreadable.append(f"{path}.url is not a string")
        else:
            links.setdefault(relation, url)
    return links, unreadable


def _unreadable_link(problem: str) -> str:
    return (
        f"a Bundle link that cannot be read ({problem}): if it names a next page of search "
        "results, the records on that page are not in the input and nothing can say so"
    )


def missing_pages(pages: Iterable[SearchPage]) -> list[Skipped]:
    """A notice for each page of search results whose next page is not in the input set (no
    page in it has that `self` link): the records on the pages left out are not imported."""
    collected = list(pages)
    present = {page.url for page in collected}
    return [
        Skipped(
            page.origin,
            "Bundle",
            page.bundle_id,
            f"a page of search results with a next page ({page.next_url[:_QUOTED_URL]}) that is "
            "not in the input: the records on the other pages are not in it; fetch every page "
            "(follow the next links) and import them in one command",
        )
        for page in collected
        if page.next_url is not None and page.next_url not in present
    ]


_QUOTED_URL: Final = 200


def bundle_time(bundle: Json) -> datetime | None:
    """When a Bundle was assembled: its `timestamp`, else its `meta.lastUpdated` (a value that
    is not a valid FHIR instant counts as absent: it only ever stands in for a missing date)."""
    meta = bundle.get("meta")
    for value in (
        bundle.get("timestamp"),
        meta.get("lastUpdated") if isinstance(meta, Mapping) else None,
    ):
        found = _instant_or_none(value)
        if found is not None:
            return found
    return None


def _bundle_entries(
    bundle: Json, origin: str, document_time: datetime | None, modified_by: Modifier | None
) -> ParsedInput:
    entries = bundle.get("entry", [])
    if not isinstance(entries, list):
        error = FhirError(origin, Problem.INVALID_VALUE.value, "Bundle.entry is not a list")
        return ParsedInput(errors=(error,))
    return combine(
        _bundle_entry(entry, f"{origin}#entry[{n}]", document_time, modified_by)
        for n, entry in enumerate(entries)
    )


def _bundle_entry(
    entry: object, origin: str, document_time: datetime | None, modified_by: Modifier | None
) -> ParsedInput:
    if not isinstance(entry, Mapping):
        error = FhirError(origin, Problem.INVALID_VALUE.value, "a Bundle entry is not an object")
        return ParsedInput(errors=(error,))
    resource = entry.get("resource")
    patched = _changed_claim(entry, "PATCH")
    if patched is not None:
        message = (
            f"{patched} is patched (Bundle.entry.request PATCH): a patch is not applied, so what "
            "it changes (a refutation, a stop) would be lost; send the whole resource (PUT) "
            "instead"
        )
        return ParsedInput(errors=(FhirError(origin, Problem.PATCH_NOT_IMPORTED.value, message),))
    if _method(entry) == "DELETE":
        return _deletion(entry, resource, origin)
    if resource is None:
        failed = _failed_response(entry.get("response"))
        if failed is not None:
            return unpack(failed, origin)
        reason = "bundle entry without a resource (request or response only)"
        return ParsedInput(skipped=(Skipped(origin, "Bundle.entry", None, reason),))
    full_url = entry.get("fullUrl")
    resource = _with_response_meta(resource, entry.get("response"))
    return unpack(
        resource,
        origin,
        full_url if isinstance(full_url, str) else None,
        document_time,
        conditional_identifier(entry.get("request")),
        _put_url(entry.get("request")),
        modified_by or entry_modifier(entry),
    )


def _deletion(entry: Json, resource: object, origin: str) -> ParsedInput:
    """A `DELETE` entry, never read as a version of what it deletes, also when it carries the
    resource (a server's history may hold the deleted version): the deletion of a claim
    resource, named by the request's url or by the resource, is an error, since what its
    earlier versions recorded would stay in force without a word (named by the url when it
    names an id, else by the resource); the resource of another deletion is skipped."""
    by_url, carried = _changed_claim(entry, "DELETE"), _claim_named(resource)
    deleted = by_url if by_url is not None and ("/" in by_url or carried is None) else carried
    if deleted is not None:
        carried = ", nor is the resource its entry carries," if resource is not None else ""
        message = (
            f"{deleted} is deleted (Bundle.entry.request DELETE): deletions are not "
            f"imported{carried} and what its earlier versions recorded stays; send a version of "
            "it marked entered-in-error instead"
        )
        return ParsedInput(
            errors=(FhirError(origin, Problem.DELETION_NOT_IMPORTED.value, message),)
        )
    if resource is None:
        reason = "bundle entry without a resource (request or response only)"
        return ParsedInput(skipped=(Skipped(origin, "Bundle.entry", None, reason),))
    held = resource if isinstance(resource, Mapping) else {}
    kind, identifier = held.get("resourceType"), held.get("id")
    skip = Skipped(
        origin,
        kind if isinstance(kind, str) else "Bundle.entry",
        identifier if isinstance(identifier, str) else None,
        "deleted (Bundle.entry.request DELETE): the resource its entry carries is not read",
    )
    return ParsedInput(skipped=(skip,))


def _claim_named(resource: object) -> str | None:
    """`Type/id` (or the type alone) of a claim resource, None for anything else."""
    if not isinstance(resource, Mapping) or not text_among(
        resource.get("resourceType"), CLAIM_TYPES
    ):
        return None
    identifier = resource.get("id")
    named = isinstance(identifier, str) and identifier.strip()
    return f"{resource['resourceType']}/{identifier}" if named else str(resource["resourceType"])


def _put_url(request: object) -> str | None:
    if not isinstance(request, Mapping) or request.get("method") != "PUT":
        return None
    url = request.get("url")
    return url if isinstance(url, str) else None


def conditional_identifier(request: object) -> str | None:
    """The `system|value` of the one `identifier` a conditional update (`PUT
    Type?identifier=...`) or conditional create (`ifNoneExist: identifier=...`) searches by."""
    if not isinstance(request, Mapping):
        return None
    method, url, if_none_exist = (request.get(key) for key in ("method", "url", "ifNoneExist"))
    if method == "PUT" and isinstance(url, str) and "?" in url:
        query = url.split("?", 1)[1]
    elif method == "POST" and isinstance(if_none_exist, str):
        query = if_none_exist.removeprefix("?")
    else:
        return None
    values = parse_qs(query).get("identifier", [])
    return (values[0].strip() or None) if len(values) == 1 else None


def _with_response_meta(resource: object, response: object) -> object:
    """The resource with what a history Bundle's entry response says of its version
    (`etag` W/"<versionId>", `lastModified`) as the `meta.versionId` and `meta.lastUpdated` it
    lacks: the same facts, where a server's history puts them (a `lastModified` that is not a
    FHIR instant is passed over: it only ever stands in for a missing one)."""
    if not isinstance(resource, Mapping) or not isinstance(response, Mapping):
        return resource
    meta = resource.get("meta")
    meta = dict(meta) if isinstance(meta, Mapping) else {}
    etag, modified = response.get("etag"), response.get("lastModified")
    if isinstance(etag, str) and "versionId" not in meta:
        version = etag.removeprefix("W/").strip('"')
        if version:
            meta["versionId"] = version
    if "lastUpdated" not in meta and _instant_or_none(modified) is not None:
        meta["lastUpdated"] = modified
    return {**resource, "meta": meta} if meta else resource


def reference_key(reference: str) -> str:
    """A reference as references are compared: a `urn:uuid:` in lower case (RFC 4122: its hex
    digits are case-insensitive, and SQL Server and .NET sources write them in upper case), so
    one patient written both ways stays one patient."""
    if reference[: len(_URN_UUID)].lower() == _URN_UUID:
        return _URN_UUID + reference[len(_URN_UUID) :].lower()
    return reference


_URN_UUID: Final = "urn:uuid:"


VersionRank = tuple[datetime, int]


def version_rank(resource: Json) -> VersionRank:
    """Where a version of a resource stands among the versions of the same resource: by
    `meta.lastUpdated`, then by a numeric `meta.versionId`. Versions that rank alike are not
    ordered: a versionId that is not a number (`MTU5NjQ0`, `abc`) says nothing of which is
    newer, so its text is never compared."""
    meta = resource.get("meta")
    meta = meta if isinstance(meta, Mapping) else {}
    return (_instant_or_none(meta.get("lastUpdated")) or _NO_TIME, _version_number(meta))


def _version_number(meta: Json) -> int:
    """A numeric `meta.versionId` (FHIR servers number versions 1, 2, ...); -1 for none."""
    version = meta.get("versionId")
    return int(version) if isinstance(version, str) and _numeric(version) else -1


def unordered_versions(resources: Sequence[SourcedResource]) -> dict[int, str]:
    """Position -> why, for each version of a claim resource (`CLAIM_TYPES`) that nothing
    orders against another, different version of it in the input set: recorded at the same
    time (the same `meta.lastUpdated`; without one, the same Bundle time, or neither) under
    another `meta.versionId` of which one is not a number, or under one `meta.versionId` (or
    none) naming different patients (one event id for two subjects). Such versions would be
    folded in an arbitrary order (whichever event id sorts first would hold); versions of one
    patient under the same versionId (or none) keep the same event ids, and the gate refuses
    the later one. Resources from different servers (`server_base`) are not versions of one
    another."""
    groups: dict[tuple[str, str, str | None, datetime | None], list[int]] = {}
    for position, item in enumerate(resources):
        if item.resource_type in CLAIM_TYPES and item.identity is not None:
            key = (item.resource_type, item.identity, item.server_base, _recorded_time(item))
            groups.setdefault(key, []).append(position)
    found = _one_version_two_contents(
        {
            clash: positions
            for clash, positions in clashing_versions(resources).items()
            if clash.resource_type in CLAIM_TYPES
        }
    )
    for (resource_type, identity, _, _), positions in groups.items():
        found.update(_one_version_two_patients(resources, positions))
        versions = {version_id(resources[position].resource) for position in positions}
        contents = _distinct(
            recorded_content(resources[position].resource) for position in positions
        )
        if len(versions) < 2 or len(contents) < 2 or _placed_apart(versions):
            continue
        named = ", ".join(sorted(repr(version) for version in versions if version))
        reason = (
            f"{resource_type}/{identity}: versions of this record with meta.versionId {named}, "
            "recorded at the same time (the same meta.lastUpdated, or none), are different and "
            "nothing says which version is newer (a versionId that is not a number does not "
            f"order them, nor do numbers from {VERSION_SLOTS} on): give each version "
            "meta.lastUpdated, or import the current one only"
        )
        found.update((position, reason) for position in positions)
    return found


class VersionClash(NamedTuple):
    """Resources of one type and id, from one server, under one `meta.versionId`."""

    resource_type: str
    identity: str
    server_base: str | None
    version: str


def clashing_versions(resources: Sequence[SourcedResource]) -> dict[VersionClash, list[int]]:
    """The positions of resources that differ (`recorded_content`) from another of their id,
    from one server, under the same `meta.versionId`, whatever their `meta.lastUpdated`: a
    server gives each change a new versionId, so they are not versions of one record but
    records of two sources under one id (bulk NDJSON names no server), and the later one
    would replace the other (its drug, its patient, its status)."""
    groups: dict[VersionClash, list[int]] = {}
    for position, item in enumerate(resources):
        version = version_id(item.resource)
        if item.identity is not None and version:
            key = VersionClash(item.resource_type, item.identity, item.server_base, version)
            groups.setdefault(key, []).append(position)
    return {
        clash: positions
        for clash, positions in groups.items()
        if len(_distinct(recorded_content(resources[p].resource) for p in positions)) > 1
    }


def _one_version_two_contents(clashes: Mapping[VersionClash, list[int]]) -> dict[int, str]:
    """Position -> why, for each claim resource of `clashes`."""
    found: dict[int, str] = {}
    for clash, positions in clashes.items():
        reason = (
            f"{clash.resource_type}/{clash.identity}: different records under one "
            f"meta.versionId ({clash.version!r}): a server gives each change of a record a new "
            "versionId, so they are not versions of one record (records of two sources under "
            "one id?) and nothing says which one holds: import each source's records under ids "
            "of their own"
        )
        found.update((position, reason) for position in positions)
    return found


def _one_version_two_patients(
    resources: Sequence[SourcedResource], positions: Sequence[int]
) -> dict[int, str]:
    """Position -> why, for each of the resources of one id, recorded at one time, under one
    `meta.versionId` (or none) that name different patients: nothing says which is the
    record (or that one moved it from the other patient), and they would share one event id
    for two subjects."""
    by_version: dict[str | None, list[int]] = {}
    for position in positions:
        by_version.setdefault(version_id(resources[position].resource), []).append(position)
    found: dict[int, str] = {}
    for version, same in by_version.items():
        patients = {_patient_named(resources[position].resource) for position in same}
        if len(patients - {None}) < 2:
            continue
        item = resources[same[0]]
        named = "no meta.versionId" if version is None else f"meta.versionId {version!r}"
        reason = (
            f"{item.resource_type}/{item.identity}: resources with this id, {named} and the "
            "same recorded time (the same meta.lastUpdated, or none) name different patients: "
            "nothing says which is the record, or that it moved from one patient to the other "
            "(give each version meta.versionId or meta.lastUpdated)"
        )
        found.update((position, reason) for position in same)
    return found


def _patient_named(resource: Json) -> str | None:
    """The patient a resource names (`patient` or `subject`) by a reference that can be read
    (`Patient/<id>`, whatever server URL it is written under, or a `urn:uuid:`), else None: a
    resource naming none is an error of its own."""
    for key in ("patient", "subject"):
        holder = resource.get(key)
        reference = holder.get("reference") if isinstance(holder, Mapping) else None
        if not isinstance(reference, str):
            continue
        if reference.lower().startswith("urn:"):
            return reference_key(reference)
        relative = relative_reference(reference)
        return relative if relative is not None and relative.split("/")[1].strip() else None
    return None


def _recorded_time(item: SourcedResource) -> datetime | None:
    meta = item.resource.get("meta")
    last_updated = _instant_or_none(meta.get("lastUpdated")) if isinstance(meta, Mapping) else None
    return last_updated or item.document_time


def version_id(resource: Json) -> str | None:
    """A resource's `meta.versionId`, None when it has none (or not as text)."""
    meta = resource.get("meta")
    version = meta.get("versionId") if isinstance(meta, Mapping) else None
    return (version.strip() or None) if isinstance(version, str) else None


def _numeric(version: str) -> bool:
    return version.isdecimal() and len(version) <= _LONGEST_NUMBER


VERSION_SLOTS: Final = 999
"""Numbered versions are placed up to this many milliseconds after their recorded time, one
per number (`version_slot`): versions 999 and later share the last place."""


def version_slot(version: str | None) -> int:
    """Where a numeric `meta.versionId` places its version after its recorded time, in
    milliseconds (0 for none or one that is not a number)."""
    if version is None or not version.isdecimal():
        return 0
    if len(version) > len(str(VERSION_SLOTS)):
        return VERSION_SLOTS
    return min(int(version), VERSION_SLOTS)


def _placed_apart(versions: set[str | None]) -> bool:
    """Whether the numbered versions place each version of a group at a time of its own."""
    numbered = [version for version in versions if version]
    slots = {version_slot(version) for version in numbered}
    return all(_numeric(version) for version in numbered) and len(slots) == len(numbered)


def recorded_content(resource: Json) -> dict[str, object]:
    """The resource without its `meta` and its narrative `text`: what two copies of one version
    share whatever the export (a server writes the narrative in one answer and leaves it out
    of another, `_summary=data`; `meta.lastUpdated` may differ between copies)."""
    return {key: value for key, value in resource.items() if key not in ("meta", "text")}


def _distinct(values: Iterable[dict[str, object]]) -> list[dict[str, object]]:
    distinct: list[dict[str, object]] = []
    for value in values:
        if value not in distinct:
            distinct.append(value)
    return distinct


_NO_TIME: Final = datetime(1, 1, 1, tzinfo=UTC)
_LONGEST_NUMBER: Final = 30
"""Digits of the longest versionId read as a number (a longer one is no server's counter: like
any versionId that is not a number, it orders nothing)."""


def _instant_or_none(value: object) -> datetime | None:
    """A FHIR date or instant standing in for a missing one; anything else counts as absent."""
    if not isinstance(value, str):
        return None
    try:
        return parse_fhir_datetime(value)
    except ValueError:
        return None


def _failed_response(response: object) -> Json | None:
    """The OperationOutcome a batch or transaction response entry gives for a request that
    failed (its `outcome`, else one made of its 4xx or 5xx `status`, also sent as a JSON number
    where R4 wants text), as the source's report of what it could not give
    (`schemas.fhir.outcomes`); None for an entry that did not fail."""
    if not isinstance(response, Mapping):
        return None
    outcome, status = response.get("outcome"), response.get("status")
    if isinstance(outcome, Mapping) and outcome.get("resourceType") == "OperationOutcome":
        return outcome
    if isinstance(status, int) and not isinstance(status, bool):
        status = str(status)
    if isinstance(status, str) and status.strip()[:1] in ("4", "5"):
        issue = {"severity": "error", "code": "processing", "diagnostics": f"status {status}"}
        return {"resourceType": "OperationOutcome", "issue": [issue]}
    return None


def _changed_claim(entry: Json, method: str) -> str | None:
    """`Type/id` of the claim resource a history, batch or transaction entry changes with
    `method` (DELETE, PATCH), if it does."""
    if _method(entry) != method:
        return None
    url = entry["request"].get("url")
    if not isinstance(url, str):
        return None
    path = url.split("?", 1)[0].rstrip("/").split("/")
    for position, segment in enumerate(path):
        if segment in CLAIM_TYPES:
            return "/".join(path[position : position + 2]) if position + 1 < len(path) else url
    return None


def _method(entry: Json) -> str | None:
    """An entry's `request.method`, in capitals (`delete` is read as `DELETE`)."""
    request = entry.get("request")
    method = request.get("method") if isinstance(request, Mapping) else None
    return method.strip().upper() if isinstance(method, str) else None
