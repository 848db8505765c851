"""An OpenTelemetry SDK set up to append each finished span as a JSON line to a file: what a
worker subprocess of the tests exports to when SQLQUEUE_TEST_OTEL_FILE names one (settings.py)."""

import json
import threading

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class FileExporter(SpanExporter):
    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()

    def export(self, spans):
        with self.lock, open(self.path, "a") as out:
            for span in spans:
                out.write(json.dumps({
                    "name": span.name, "kind": span.kind.name,
                    "trace_id": format(span.context.trace_id, "032x"),
                    "span_id": format(span.context.span_id, "016x"),
                    "parent": span.parent and format(span.parent.span_id, "016x"),
                    "links": [format(link.context.span_id, "016x") for link in span.links],
                    "attributes": dict(span.attributes),
                }) + "\n")
        return SpanExportResult.SUCCESS


def install(path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter(path)))
    trace.set_tracer_provider(provider)
