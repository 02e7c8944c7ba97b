//! The cluster recipes (examples/slurm/*.sbatch, examples/kubernetes/*.yaml)
//! run scarsim command lines that scarsim accepts: each is parsed out of its
//! file, its variables replaced by the file's defaults (and by the values
//! examples/slurm/e2e.sh gives them), and handed to the same clap parser
//! the binary uses, then checked against the bundled scenarios and the
//! shard syntax.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Parser;
use scarsim::cli::{Cli, Command};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

/// Splits a shell command into words: whitespace separates, double and
/// single quotes group (the recipes use no other shell syntax in scarsim's
/// arguments).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut started = false;
    let mut quote = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started {
                    out.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            (None, c) => {
                cur.push(c);
                started = true;
            }
        }
    }
    assert!(quote.is_none(), "unclosed quote in {line:?}");
    if started {
        out.push(cur);
    }
    out
}

/// Replaces `$VAR` and `${VAR}` / `${VAR:-default}` in `word` by `vars`
/// (falling back on the default); an unknown variable is a test failure.
fn expand(word: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = word;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        rest = &rest[i + 1..];
        let (name, default, len) = if let Some(body) = rest.strip_prefix('{') {
            let end = body.find('}').expect("closing brace");
            let inner = &body[..end];
            match inner.split_once(":-") {
                Some((n, d)) => (n, Some(d), end + 2),
                None => (inner, None, end + 2),
            }
        } else {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            (&rest[..end], None, end)
        };
        let value = vars
            .get(name)
            .cloned()
            .or(default.map(str::to_string))
            .unwrap_or_else(|| panic!("{word:?}: ${name} has no value"));
        out.push_str(&value);
        rest = &rest[len..];
    }
    out.push_str(rest);
    out
}

/// The defaults an sbatch file gives its variables (`VAR=${VAR:-default}`).
fn defaults(text: &str) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    for line in text.lines() {
        let line = line.split(" #").next().unwrap().trim();
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        if !name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            continue;
        }
        if let Some(inner) = value
            .strip_prefix("${")
            .and_then(|v| v.strip_suffix('}'))
            .and_then(|v| v.split_once(":-"))
        {
            assert_eq!(inner.0, name, "{line}");
            vars.insert(name.to_string(), inner.1.to_string());
        }
    }
    vars
}

/// The scarsim command lines of an sbatch file: every line that starts with
/// `"$SCARSIM"`, joined with its `\` continuations, as words (the binary
/// first).
fn sbatch_commands(text: &str) -> Vec<Vec<String>> {
    let mut cmds = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if !line.trim_start().starts_with("\"$SCARSIM\"") {
            continue;
        }
        let mut full = line.trim().to_string();
        while full.ends_with('\\') {
            full.pop();
            full.push(' ');
            full.push_str(lines.next().expect("continued line").trim());
        }
        cmds.push(words(&full));
    }
    cmds
}

/// Checks that clap accepts `args` (scarsim's arguments, without the
/// binary) as the binary would, and that what they name exists.
fn accepted(file: &Path, args: &[String]) -> Command {
    let argv = std::iter::once("scarsim".to_string()).chain(args.iter().cloned());
    let cli = Cli::try_parse_from(argv)
        .unwrap_or_else(|e| panic!("{}: scarsim {args:?} is refused:\n{e}", file.display()));
    let bundled: Vec<&str> = scarsim::scenario::bundled::names().collect();
    let check_shard = |s: &str| {
        // `env/N` reads the index at run time; check it with index 0.
        let concrete = s.replace("env/", "0/");
        scarsim::experiment::units::Shard::parse(&concrete)
            .unwrap_or_else(|e| panic!("{}: --shard {s}: {e:#}", file.display()));
    };
    match &cli.command {
        Command::Run(r) => {
            for s in &r.scenarios {
                assert!(
                    bundled.contains(&s.as_str()),
                    "{}: `{s}` is not a bundled scenario",
                    file.display()
                );
            }
            if let Some(s) = &r.shard {
                check_shard(s);
            }
        }
        Command::Reproduce(r) => {
            scarsim::reproduce::selected_names(&r.only)
                .unwrap_or_else(|e| panic!("{}: {e:#}", file.display()));
            if let Some(s) = &r.shard {
                check_shard(s);
            }
        }
        Command::Merge { shards, .. } => assert!(!shards.is_empty()),
        other => panic!("{}: unexpected subcommand {other:?}", file.display()),
    }
    cli.command
}

/// Every sbatch file's scarsim command, with its defaults and with the
/// values e2e.sh gives EXTRA, is accepted; the merge steps merge exactly
/// the shard folders the array steps write.
#[test]
fn sbatch_recipes_run_commands_scarsim_accepts() {
    let sbatch = files("examples/slurm", "sbatch");
    let names: Vec<String> = sbatch
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    for want in [
        "scarsim-array.sbatch",
        "merge-shards.sbatch",
        "reproduce-array.sbatch",
        "reproduce-gather.sbatch",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
    let e2e = read(&root().join("examples/slurm/e2e.sh"));
    let extras: Vec<String> = e2e
        .lines()
        .filter_map(|l| l.trim().strip_prefix("export EXTRA=\""))
        .map(|l| l.split('"').next().unwrap().to_string())
        .collect();
    assert!(extras.len() >= 3, "e2e.sh sets EXTRA: {extras:?}");
    for path in &sbatch {
        let text = read(path);
        assert!(
            text.starts_with("#!/usr/bin/env bash\n"),
            "{}",
            path.display()
        );
        let cmds = sbatch_commands(&text);
        assert_eq!(cmds.len(), 1, "{}: {cmds:?}", path.display());
        // Each variant of EXTRA the e2e test uses, and the default (empty).
        for extra in std::iter::once("").chain(extras.iter().map(String::as_str)) {
            let mut vars = defaults(&text);
            vars.insert("SLURM_ARRAY_TASK_ID".into(), "0".into());
            let mut args = Vec::new();
            for w in &cmds[0][1..] {
                match w.as_str() {
                    "$EXTRA" => args.extend(words(extra)),
                    "${dirs[@]}" => {
                        let n: usize = vars["SHARDS"].parse().unwrap();
                        args.extend((0..n).map(|i| {
                            format!("{}/{}.shard-{i}-of-{n}", vars["OUT"], vars["SCENARIO_NAME"])
                        }));
                    }
                    _ => args.push(expand(w, &vars)),
                }
            }
            // A --quick EXTRA belongs to the reproduce recipes, the others
            // to `run`.
            let reproduce = args[0] == "reproduce";
            if extra.contains("--quick") != reproduce && !extra.is_empty() {
                continue;
            }
            match accepted(path, &args) {
                Command::Run(r) => {
                    assert_eq!(
                        r.shard.as_deref(),
                        Some(&*format!("env/{}", vars["SHARDS"]))
                    );
                    assert!(r.resume, "{}: a re-run task must resume", path.display());
                    assert!(
                        !r.quiet,
                        "{}: its output reports the resume",
                        path.display()
                    );
                }
                Command::Reproduce(r) => {
                    if r.merge.is_empty() {
                        assert_eq!(
                            r.shard.as_deref(),
                            Some(&*format!("env/{}", vars["SHARDS"]))
                        );
                        assert!(r.resume);
                    } else {
                        assert_eq!(r.merge, vec![PathBuf::from(&vars["OUT"])]);
                    }
                }
                Command::Merge { shards, .. } => {
                    // merge-shards.sbatch's defaults match scarsim-array.sbatch's.
                    let array = defaults(&read(&path.with_file_name("scarsim-array.sbatch")));
                    assert_eq!(vars["SHARDS"], array["SHARDS"]);
                    assert_eq!(vars["OUT"], array["OUT"]);
                    assert_eq!(vars["SCENARIO_NAME"], array["SCENARIO"]);
                    assert_eq!(shards.len(), vars["SHARDS"].parse::<usize>().unwrap());
                }
                _ => unreachable!(),
            }
        }
        // The resource requests are defaults sbatch's command line overrides
        // (e2e.sh relies on it to fit a 2-core node).
        assert!(
            text.contains("#SBATCH --cpus-per-task="),
            "{}",
            path.display()
        );
    }
}

/// The YAML subset the manifests use: `key: value`, `- item` lists and
/// folded `>-` blocks. Returns the container's `command` and `args` words.
fn container_command(text: &str) -> (Vec<String>, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let strip = |l: &str| -> String {
        // A comment starts at ` #` outside quotes (the manifests quote no `#`).
        let l = l.split(" #").next().unwrap();
        l.trim().to_string()
    };
    let unquote = |s: &str| s.trim().trim_matches('"').to_string();
    let mut command = Vec::new();
    let mut args = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = strip(lines[i]);
        if let Some(v) = l.strip_prefix("command:") {
            let v = v.trim();
            let list = v
                .strip_prefix('[')
                .and_then(|v| v.strip_suffix(']'))
                .expect("command as a flow list");
            command = list.split(',').map(unquote).collect();
        } else if l == "args:" {
            let base = indent(lines[i]);
            i += 1;
            while i < lines.len() && indent(lines[i]) > base && !lines[i].trim().is_empty() {
                let item = strip(lines[i]);
                let item = item.strip_prefix("- ").expect("args as a block list");
                if item == ">-" || item == ">" {
                    let at = indent(lines[i]);
                    let mut folded = Vec::new();
                    i += 1;
                    while i < lines.len() && indent(lines[i]) > at && !lines[i].trim().is_empty() {
                        folded.push(lines[i].trim());
                        i += 1;
                    }
                    args.push(folded.join(" "));
                    continue;
                }
                args.push(unquote(item));
                i += 1;
            }
            continue;
        }
        i += 1;
    }
    (command, args)
}

/// The Kubernetes manifests run scarsim command lines scarsim accepts, and
/// the merge Job merges the shards the indexed Job writes.
#[test]
fn kubernetes_manifests_run_commands_scarsim_accepts() {
    let manifests = files("examples/kubernetes", "yaml");
    assert_eq!(manifests.len(), 2, "{manifests:?}");
    let mut completions = None;
    let mut shard_count = None;
    for path in &manifests {
        let text = read(path);
        let (command, args) = container_command(&text);
        let scarsim_args: Vec<String> = match command.as_slice() {
            [bin] if bin == "scarsim" => args,
            [sh, c] if sh == "sh" && c == "-c" => {
                assert_eq!(args.len(), 1, "{}: {args:?}", path.display());
                let w = words(&args[0]);
                assert_eq!(w[0], "scarsim", "{}", path.display());
                w[1..].to_vec()
            }
            _ => panic!("{}: command {command:?}", path.display()),
        };
        assert!(!scarsim_args.is_empty(), "{}: no args", path.display());
        if let Some(c) = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("completions:"))
        {
            completions = Some(words(c)[0].parse::<usize>().unwrap());
        }
        // The shell expands the merge's glob: check it with the folders it
        // matches.
        let n = completions.or(shard_count).unwrap_or(8);
        let expanded: Vec<String> = scarsim_args
            .iter()
            .flat_map(|a| {
                if a.contains("shard-*-of-") {
                    (0..n).map(|i| a.replace('*', &i.to_string())).collect()
                } else {
                    vec![a.clone()]
                }
            })
            .collect();
        match accepted(path, &expanded) {
            Command::Run(r) => {
                let s = r.shard.expect("the indexed job shards");
                shard_count = Some(s.trim_start_matches("env/").parse::<usize>().unwrap());
                assert!(r.resume, "{}: a retried pod must resume", path.display());
            }
            Command::Merge { shards, .. } => {
                assert!(
                    shards
                        .iter()
                        .all(|s| s.to_string_lossy().contains(".shard-"))
                );
            }
            _ => unreachable!(),
        }
    }
    assert_eq!(
        completions, shard_count,
        "`completions` must equal the --shard env/N count"
    );
}

#[test]
fn the_little_parsers_work() {
    assert_eq!(words(r#"a "b c" 'd' e"#), ["a", "b c", "d", "e"]);
    let vars: BTreeMap<String, String> = [("A".to_string(), "x".to_string())].into();
    assert_eq!(expand("$A/${B:-y}/${A}", &vars), "x/y/x");
    assert_eq!(
        defaults("X=${X:-1}   # c\nY=2\n")
            .into_iter()
            .collect::<Vec<_>>(),
        [("X".to_string(), "1".to_string())]
    );
    let (c, a) = container_command(
        "command: [\"sh\", \"-c\"]\nargs:\n  - >-\n    scarsim merge a\n    --out b\nnext: 1\n",
    );
    assert_eq!(c, ["sh", "-c"]);
    assert_eq!(a, ["scarsim merge a --out b"]);
}
