"""CloudWatch Logs reads: DescribeLogGroups/LogStreams, GetLogEvents and FilterLogEvents.

Every look-up is scoped to the caller's account and the region its request was signed
for; another account's (or region's) group is simply not found.
"""

from __future__ import annotations

import re
from functools import partial

from sqlalchemy.orm import Session

from core.logs.errors import InvalidParameterException, ResourceNotFoundException
from core.logs.filter_pattern import parse_filter_pattern
from core.logs.shapes import (
    DescribeLogGroupsRequest,
    DescribeLogGroupsResponse,
    DescribeLogStreamsRequest,
    DescribeLogStreamsResponse,
    FilteredLogEvent,
    FilterLogEventsRequest,
    FilterLogEventsResponse,
    GetLogEventsRequest,
    GetLogEventsResponse,
    GroupAddressed,
    LogGroupShape,
    LogStreamShape,
    OutputLogEvent,
)
from core.logs.tokens import (
    decode_page_token,
    decode_position,
    encode_page_token,
    parse_stream_token,
    stream_token,
)
from core.principal import Principal
from db.models.log_event import LogEvent
from db.models.log_group import LogGroup
from db.models.log_stream import LogStream
from db.queries.log_event import read_stream_events, scan_group_events
from db.queries.log_group import get_log_group, list_log_groups, stored_bytes_by_group
from db.queries.log_stream import get_log_stream, list_log_streams, streams_by_id

_GROUP_ARN = re.compile(r"arn:aws[a-z\-]*:logs:([a-z0-9\-]+):(\d{12}):log-group:([^:]+)(?::\*)?")
# A filter reads at most this many events per call, then hands back a token, as AWS does.
_MAX_SCANNED_EVENTS = 10_000
_SCAN_BATCH = 1000
_HEAD: tuple[int, int] = (-1, 0)
_TAIL: tuple[int, int] = (2**62, 0)


def group_arn(principal: Principal, name: str) -> str:
    return f"arn:aws:logs:{principal.region}:{principal.aws_account_id}:log-group:{name}"


def _group_name_from_identifier(principal: Principal, identifier: str) -> str | None:
    """A name stays a name; an ARN must be the caller's own account and region."""
    match = _GROUP_ARN.fullmatch(identifier)
    if match is None:
        return None if identifier.startswith("arn:") else identifier
    region, account, name = match.groups()
    return name if (region, account) == (principal.region, principal.aws_account_id) else None


def resolve_group(session: Session, principal: Principal, request: GroupAddressed) -> LogGroup:
    if request.log_group_name is not None and request.log_group_identifier is not None:
        raise InvalidParameterException("LogGroup name and LogGroup ARN are mutually exclusive parameters.")
    if request.log_group_name is None and request.log_group_identifier is None:
        raise InvalidParameterException("Either logGroupName or logGroupIdentifier must be specified.")
    name = request.log_group_name
    if name is None:
        name = _group_name_from_identifier(principal, request.log_group_identifier or "")
    group = (
        None
        if name is None
        else get_log_group(session, account_id=principal.account_id, region=principal.region, name=name)
    )
    if group is None:
        raise ResourceNotFoundException("The specified log group does not exist.")
    return group


def describe_log_groups(
    session: Session, principal: Principal, request: DescribeLogGroupsRequest
) -> DescribeLogGroupsResponse:
    if request.log_group_name_prefix and request.log_group_name_pattern:
        raise InvalidParameterException(
            "LogGroup name prefix and LogGroup name pattern are mutually exclusive parameters."
        )
    names = None
    if request.log_group_identifiers is not None:
        if request.log_group_name_prefix or request.log_group_name_pattern:
            raise InvalidParameterException(
                "logGroupIdentifiers cannot be combined with a name prefix or pattern."
            )
        names = [
            name
            for identifier in request.log_group_identifiers
            if (name := _group_name_from_identifier(principal, identifier)) is not None
        ]
    after = decode_page_token(request.next_token, "groups")
    if after is not None and not isinstance(after, str):
        raise InvalidParameterException("The specified nextToken is invalid.")
    groups = list_log_groups(
        session,
        account_id=principal.account_id,
        region=principal.region,
        name_prefix=request.log_group_name_prefix,
        name_contains=request.log_group_name_pattern,
        names=names,
        after_name=after,
        limit=request.limit + 1,
    )
    page, more = groups[: request.limit], len(groups) > request.limit
    sizes = stored_bytes_by_group(session, group_ids=[group.id for group in page])
    return DescribeLogGroupsResponse(
        log_groups=[_group_shape(principal, group, sizes.get(group.id, 0)) for group in page],
        next_token=encode_page_token("groups", page[-1].name) if more else None,
    )


def _group_shape(principal: Principal, group: LogGroup, stored_bytes: int) -> LogGroupShape:
    arn = group_arn(principal, group.name)
    return LogGroupShape(
        log_group_name=group.name,
        creation_time=int(group.created_at.timestamp() * 1000),
        retention_in_days=group.retention_in_days,
        arn=f"{arn}:*",
        log_group_arn=arn,
        stored_bytes=stored_bytes,
    )


def describe_log_streams(
    session: Session, principal: Principal, request: DescribeLogStreamsRequest
) -> DescribeLogStreamsResponse:
    group = resolve_group(session, principal, request)
    by_last_event = request.order_by == "LastEventTime"
    if by_last_event and request.log_stream_name_prefix:
        raise InvalidParameterException("Cannot order by LastEventTime with a logStreamNamePrefix.")
    offset = decode_page_token(request.next_token, "streams") or 0
    if type(offset) is not int or offset < 0:
        raise InvalidParameterException("The specified nextToken is invalid.")
    streams = list_log_streams(
        session,
        group_id=group.id,
        name_prefix=request.log_stream_name_prefix,
        by_last_event=by_last_event,
        descending=request.descending,
        offset=offset,
        limit=request.limit + 1,
    )
    page, more = streams[: request.limit], len(streams) > request.limit
    arn = group_arn(principal, group.name)
    return DescribeLogStreamsResponse(
        log_streams=[_stream_shape(arn, stream) for stream in page],
        next_token=encode_page_token("streams", offset + len(page)) if more else None,
    )


def _stream_shape(group_arn_: str, stream: LogStream) -> LogStreamShape:
    return LogStreamShape(
        log_stream_name=stream.name,
        creation_time=int(stream.created_at.timestamp() * 1000),
        first_event_timestamp=stream.first_event_timestamp,
        last_event_timestamp=stream.last_event_timestamp,
        last_ingestion_time=stream.last_ingestion_time,
        arn=f"{group_arn_}:log-stream:{stream.name}",
    )


def get_log_events(
    session: Session, principal: Principal, request: GetLogEventsRequest
) -> GetLogEventsResponse:
    """Forward tokens read on from the newest event returned; backward ones go back before the
    oldest. A token that reaches the end comes back unchanged, which ends botocore's paginator."""
    group = resolve_group(session, principal, request)
    stream = get_log_stream(session, group_id=group.id, name=request.log_stream_name)
    if stream is None:
        raise ResourceNotFoundException("The specified log stream does not exist.")
    if request.next_token is not None:
        direction, position = parse_stream_token(request.next_token)
        forward = direction == "f"
    else:
        forward, position = request.start_from_head, (_HEAD if request.start_from_head else _TAIL)
    events = read_stream_events(
        session,
        stream_id=stream.id,
        after=position if forward else None,
        before=None if forward else position,
        start_time=request.start_time,
        end_time=request.end_time,
        limit=request.limit,
    )
    if events:
        first, last = (events[0].timestamp, events[0].id), (events[-1].timestamp, events[-1].id)
    elif forward:
        first = last = position
    else:  # nothing before ``position``: reading forward goes on from it
        first, last = position, (position[0], position[1] - 1)
    return GetLogEventsResponse(
        events=[
            OutputLogEvent(
                timestamp=event.timestamp, message=event.message, ingestion_time=event.ingestion_time
            )
            for event in events
        ],
        next_forward_token=stream_token("f", last),
        next_backward_token=stream_token("b", first),
    )


def filter_log_events(
    session: Session, principal: Principal, request: FilterLogEventsRequest
) -> FilterLogEventsResponse:
    """Matching events of the group in time order, at most _MAX_SCANNED_EVENTS read per call.

    A page that returned events carries a nextToken even when it reached the end: a reader
    that keeps the last token (ModelBuilder.deploy's live logging) resumes after what it saw,
    and botocore's paginator stops on the empty page that follows. A sparse match may come
    back with few (or no) events and a nextToken.
    """
    group = resolve_group(session, principal, request)
    pattern = parse_filter_pattern(request.filter_pattern)
    names = streams_by_id(session, group_id=group.id)
    scan = partial(
        scan_group_events,
        session,
        group_id=group.id,
        stream_ids=_selected_streams(names, request),
        start_time=request.start_time,
        end_time=request.end_time,
        must_contain=pattern.all_of,
    )
    position = decode_position(request.next_token, "events")
    found: list[FilteredLogEvent] = []
    scanned = 0
    while len(found) < request.limit and scanned < _MAX_SCANNED_EVENTS:
        batch_size = min(_SCAN_BATCH, _MAX_SCANNED_EVENTS - scanned)
        batch = scan(after=position, limit=batch_size)
        full = False
        for event in batch:
            scanned += 1
            position = (event.timestamp, event.id)
            if pattern.matches(event.message):
                found.append(_filtered(names, event))
                full = len(found) == request.limit
                if full:
                    break
        if len(batch) < batch_size and not full and not found:
            return FilterLogEventsResponse(events=[])  # read to the end, nothing to resume after
        if len(batch) < batch_size and not full:
            break
    token = None if position is None else encode_page_token("events", list(position))
    return FilterLogEventsResponse(events=found, next_token=token)


def _selected_streams(names: dict[int, str], request: FilterLogEventsRequest) -> list[int] | None:
    if request.log_stream_names is not None and request.log_stream_name_prefix is not None:
        raise InvalidParameterException(
            "logStreamNames and logStreamNamePrefix are mutually exclusive parameters."
        )
    if request.log_stream_names is not None:
        wanted = set(request.log_stream_names)
        return [stream_id for stream_id, name in names.items() if name in wanted]
    if request.log_stream_name_prefix is not None:
        prefix = request.log_stream_name_prefix
        return [stream_id for stream_id, name in names.items() if name.startswith(prefix)]
    return None


def _filtered(names: dict[int, str], event: LogEvent) -> FilteredLogEvent:
    return FilteredLogEvent(
        log_stream_name=names.get(event.log_stream_id, ""),
        timestamp=event.timestamp,
        message=event.message,
        ingestion_time=event.ingestion_time,
        event_id=str(event.id),
    )
