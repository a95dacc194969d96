//! Goal: the whole harness (both suites, every output) works, in seconds.
//! Method: tiny data sets, two rounds, every engine compiled into this build; then check the
//! files and the fields a reader of results.json relies on.

use shaledb::Compression;
use shaledb_bench::dbbench::DbBenchParams;
use shaledb_bench::engines::ENGINES;
use shaledb_bench::runner::CommonParams;
use shaledb_bench::suite::{self, YcsbParams};
use shaledb_bench::ycsb::workload::RecordShape;

fn common(dir: &std::path::Path) -> CommonParams {
    CommonParams {
        engines: ENGINES.iter().map(|spec| spec.name.to_string()).collect(),
        threads: vec![1, 2],
        cache_bytes: 1 << 20,
        data_dir: dir.join("data"),
        out_dir: dir.join("out"),
        rounds: 2,
        equal_rss_secs: 0.0,
        warmup_secs: 0.0,
        probe_secs: 0.2,
        probe_threads: 2,
        compression: shaledb::Compression::None,
    }
}

fn check_outputs(out: &std::path::Path, suite: &str, workloads: &[&str]) -> serde_json::Value {
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    for run in results["runs"].as_array().unwrap() {
        for field in [
            "engine",
            "suite",
            "workload",
            "threads",
            "ops_per_sec",
            "latency_us",
            "device_bytes_written",
            "device_bytes_read",
            "user_bytes_written",
            "cpu_seconds",
            "peak_rss_bytes",
            "disk_bytes",
            "live_bytes",
            "timeline",
        ] {
            assert!(!run[field].is_null(), "{field} missing in {run}");
        }
        assert!(run["ops_per_sec"].as_f64().unwrap() > 0.0);
        assert!(run["device_probe_iops_before"].as_f64().is_some() || run["workload"] == "load");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("[OVERALL], Throughput(ops/sec)"));
    for workload in workloads {
        for chart in ["throughput-latency", "tail-latency", "timeline"] {
            for extension in ["svg", "png"] {
                let path = out.join(format!("{suite}-{workload}-{chart}.{extension}"));
                assert!(
                    std::fs::metadata(&path).unwrap().len() > 500,
                    "{} is missing or empty",
                    path.display()
                );
            }
        }
    }
    results
}

#[test]
fn ycsb_suite_runs_every_workload() {
    let dir = tempfile::tempdir().unwrap();
    let common = common(dir.path());
    let params = YcsbParams {
        workloads: vec!['a', 'b', 'c', 'd', 'e', 'f'],
        records: 2000,
        operations: 1000,
        duration_secs: None,
        shape: RecordShape {
            field_count: 10,
            field_length: 100,
            compression_ratio: 1.0,
        },
        targets: vec![None],
        distribution: None,
    };
    let report = suite::run_ycsb(&common, &params).unwrap();
    suite::write_outputs(&report, &common.out_dir, "smoke").unwrap();
    let results = check_outputs(
        &common.out_dir,
        "ycsb",
        &["load", "a", "b", "c", "d", "e", "f"],
    );
    let runs = results["runs"].as_array().unwrap();
    // One load per engine, then 6 workloads x 2 thread counts x 2 rounds per engine.
    assert_eq!(runs.len(), ENGINES.len() * (1 + 6 * 2 * 2));
    let f = runs.iter().find(|run| run["workload"] == "f").unwrap();
    assert!(
        f["latency_us"]["READ-MODIFY-WRITE"]["count"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(f["latency_us"]["READ"]["count"].as_u64().unwrap() > 0);
}

#[test]
fn ycsb_suite_warms_up_equalizes_memory_and_sweeps_offered_loads() {
    let dir = tempfile::tempdir().unwrap();
    let mut common = common(dir.path());
    common.threads = vec![2];
    common.rounds = 1;
    common.probe_secs = 0.0;
    common.equal_rss_secs = 0.3;
    common.warmup_secs = 0.2;
    let params = YcsbParams {
        workloads: vec!['a'],
        records: 2000,
        operations: 400,
        duration_secs: None,
        shape: RecordShape {
            field_count: 10,
            field_length: 100,
            compression_ratio: 1.0,
        },
        targets: vec![Some(1000.0), None],
        distribution: None,
    };
    let report = suite::run_ycsb(&common, &params).unwrap();
    suite::write_outputs(&report, &common.out_dir, "smoke").unwrap();
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(common.out_dir.join("results.json")).unwrap())
            .unwrap();
    let calibrations = results["params"]["equal_rss"].as_array().unwrap();
    assert_eq!(calibrations.len(), ENGINES.len());
    assert_eq!(calibrations[0]["engine"], "shaledb");
    let runs = results["runs"].as_array().unwrap();
    let paced = runs
        .iter()
        .find(|run| run["workload"] == "a at 1000/s")
        .expect("the paced run is its own row");
    // 400 operations offered at 1,000/s take 0.4 s whatever the engine could do.
    let rate = paced["ops_per_sec"].as_f64().unwrap();
    assert!(rate <= 1100.0, "paced at 1000/s, ran at {rate}");
    assert_eq!(paced["operations"], 400, "the warm-up is not counted");
    assert!(runs.iter().any(|run| run["workload"] == "a"));
    for run in runs {
        // A run this small may grow the process by less than the memory an earlier engine
        // freed, so the engine's own share can be zero; it is never more than the peak.
        let engine_rss = run["engine_rss_bytes"].as_u64().unwrap();
        assert!(
            engine_rss <= run["peak_rss_bytes"].as_u64().unwrap(),
            "{run}"
        );
    }
    let report = std::fs::read_to_string(common.out_dir.join("report.md")).unwrap();
    assert!(report.contains("## Equal memory"));
    for extension in ["svg", "png"] {
        let chart = common
            .out_dir
            .join(format!("ycsb-a-t2-offered-load.{extension}"));
        assert!(std::fs::metadata(&chart).unwrap().len() > 500);
    }
}

#[test]
fn db_suite_runs_every_benchmark() {
    let dir = tempfile::tempdir().unwrap();
    let common = common(dir.path());
    let benchmarks = [
        "fillseq",
        "fillrandom",
        "overwrite",
        "readrandom",
        "readseq",
        "readwhilewriting",
        "readrandomwriterandom",
    ];
    let params = DbBenchParams {
        benchmarks: benchmarks.iter().map(|name| name.to_string()).collect(),
        num: 3000,
        key_size: 20,
        value_size: 400,
        compression_ratio: 0.5,
        read_write_percent: 80,
        duration_secs: None,
        write_rate_limit: 0,
    };
    let report = suite::run_dbbench(&common, &params).unwrap();
    suite::write_outputs(&report, &common.out_dir, "smoke").unwrap();
    let results = check_outputs(&common.out_dir, "db", &benchmarks);
    let markdown = std::fs::read_to_string(common.out_dir.join("report.md")).unwrap();
    assert!(
        markdown.contains("Values compress to about 0.5 of their size")
            && markdown.contains("Compression asked of the engines: none"),
        "{markdown}"
    );
    let runs = results["runs"].as_array().unwrap();
    let read_while_writing = runs
        .iter()
        .find(|run| run["workload"] == "readwhilewriting")
        .unwrap();
    assert_eq!(
        read_while_writing["operations"], 3000,
        "throughput counts the readers' reads"
    );
    assert!(
        read_while_writing["latency_us"]["WRITE"]["count"]
            .as_u64()
            .unwrap()
            > 0,
        "the writer wrote"
    );
    let readseq = runs
        .iter()
        .find(|run| run["workload"] == "readseq")
        .unwrap();
    assert!(
        readseq["operations"].as_u64().unwrap() >= 2900,
        "readseq reads every key"
    );
}

/// One round, one thread, no probes: the smallest run that measures.
fn quick(dir: &std::path::Path, compression: Compression) -> CommonParams {
    CommonParams {
        threads: vec![1],
        rounds: 1,
        probe_secs: 0.0,
        compression,
        ..common(dir)
    }
}

fn db_params(benchmark: &str, compression_ratio: f64) -> DbBenchParams {
    DbBenchParams {
        benchmarks: vec![benchmark.to_string()],
        num: 3000,
        key_size: 20,
        value_size: 400,
        compression_ratio,
        read_write_percent: 80,
        duration_secs: None,
        write_rate_limit: 0,
    }
}

/// ShaleDB's live bytes after the report's last run on it.
fn shaledb_live_bytes(report: &shaledb_bench::results::SuiteReport) -> u64 {
    let run = report.runs.iter().rev().find(|run| run.engine == "shaledb");
    run.unwrap().engine_stats["live_bytes"].as_u64().unwrap()
}

#[test]
fn compression_reaches_every_engine_and_its_report_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut live = Vec::new();
    for compression in [Compression::None, Compression::Lz4] {
        let common = quick(dir.path(), compression);
        let report = suite::run_dbbench(&common, &db_params("fillrandom", 0.5)).unwrap();
        for (engine, described) in report.params["engines"].as_object().unwrap() {
            let options = described["options"].as_str().unwrap();
            let compresses = compression == Compression::Lz4 && engine != "lmdb";
            assert_eq!(
                options.contains("compression lz4"),
                compresses,
                "{engine}: {options}"
            );
            assert_eq!(
                options.contains("no compression"),
                !compresses,
                "{engine}: {options}"
            );
        }
        live.push(shaledb_live_bytes(&report));
    }
    // db_bench's values at ratio 0.5: lz4 stores each in about half.
    assert!(live[1] < live[0] * 2 / 3, "live bytes none, lz4: {live:?}");
    // Data filled with another compression is filled again before it is read.
    let common = quick(dir.path(), Compression::None);
    let report = suite::run_dbbench(&common, &db_params("readrandom", 0.5)).unwrap();
    let workloads: Vec<&str> = report
        .runs
        .iter()
        .map(|run| run.workload.as_str())
        .collect();
    assert!(workloads.contains(&"fillrandom"), "{workloads:?}");
    let again = suite::run_dbbench(&common, &db_params("readrandom", 0.5)).unwrap();
    assert!(
        again.runs.iter().all(|run| run.workload == "readrandom"),
        "data reused"
    );
    assert!(suite::run_dbbench(&common, &db_params("readrandom", 0.0)).is_err());
}

#[test]
fn ycsb_values_compress_to_the_ratio_asked() {
    let dir = tempfile::tempdir().unwrap();
    let mut live = Vec::new();
    for compression_ratio in [1.0, 0.5] {
        let common = CommonParams {
            engines: vec!["shaledb".to_string()],
            ..quick(dir.path(), Compression::Lz4)
        };
        let params = YcsbParams {
            workloads: vec!['c'],
            records: 2000,
            operations: 100,
            duration_secs: None,
            shape: RecordShape {
                field_count: 10,
                field_length: 100,
                compression_ratio,
            },
            targets: vec![None],
            distribution: None,
        };
        live.push(shaledb_live_bytes(
            &suite::run_ycsb(&common, &params).unwrap(),
        ));
    }
    // Incompressible records are stored as given; at 0.5 each field is half repeated.
    assert!(live[0] > 2000 * 1110, "{live:?}");
    assert!(live[1] < live[0] * 2 / 3, "{live:?}");
}

#[test]
fn readwhilewriting_writer_keeps_to_the_write_rate_limit() {
    let dir = tempfile::tempdir().unwrap();
    let common = CommonParams {
        engines: vec!["shaledb".to_string()],
        threads: vec![2],
        ..quick(dir.path(), Compression::None)
    };
    // 100 writes of 420 bytes a second, for one second.
    let params = DbBenchParams {
        duration_secs: Some(1.0),
        write_rate_limit: 42_000,
        ..db_params("readwhilewriting", 0.5)
    };
    let report = suite::run_dbbench(&common, &params).unwrap();
    let run = report
        .runs
        .iter()
        .find(|run| run.workload == "readwhilewriting")
        .unwrap();
    let writes = run.latency_us["WRITE"].count;
    assert!(
        (50..=200).contains(&writes),
        "{writes} writes in one second at 100 a second"
    );
}
