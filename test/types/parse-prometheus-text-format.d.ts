// The package ships no types; the shape of what it answers (prom2json's).
declare module 'parse-prometheus-text-format' {
  interface Sample {
    labels?: Record<string, string>;
    value: string;
  }
  interface HistogramSample {
    labels?: Record<string, string>;
    buckets: Record<string, string>;
    count: string;
    sum: string;
  }
  interface MetricFamily {
    name: string;
    help: string;
    type: 'GAUGE' | 'COUNTER' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
    metrics: (Sample | HistogramSample)[];
  }
  export default function parsePrometheusTextFormat(text: string): MetricFamily[];
}
