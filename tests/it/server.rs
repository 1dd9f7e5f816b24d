//! `telemeter serve`: the real binary on a loopback port, talked to over
//! HTTP (api.md sections 4, 5, 7 and 8; resources.md).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;
use sha2::{Digest, Sha256};
use telemeter::server::client::{Client, Response};

pub(crate) const NOW: &str = "2026-11-21T00:00:00Z";
pub(crate) const A: &str = "MAAAAAAAAAAAAAAAAAAA";
const B: &str = "MBBBBBBBBBBBBBBBBBBB";
const C: &str = "MCCCCCCCCCCCCCCCCCCC";

pub(crate) fn sha_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A data directory: A open to any address, B only from ::1, C only from
/// 10.0.0.0/8; usage records, endpoints, registrations, recordings of A.
pub(crate) fn data_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "accounts.csv",
        &format!(
            "auth_id,currency,timezone,auth_token_sha256,allowed_ips\n\
             {A},USD,,{},\n{B},EUR,,{},::1\n{C},USD,,{},10.0.0.0/8 192.0.2.0/24\n",
            sha_hex("token-a"),
            sha_hex("token-b"),
            sha_hex("token-c")
        ),
    );
    write(
        d,
        "calls/2026/11.csv",
        &format!(
            "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,surcharge,hangup_cause\n\
             c1,{A},,2026-11-18T10:00:00Z,voice,pstn,outbound,US,60,0.013,0.001,4000\n\
             c2,{A},SA1,2026-11-19T11:00:00Z,voice,pstn,inbound,GB,120,0.0085,0,3010\n\
             c3,{A},,2026-11-19T12:00:00Z,zentrunk,sip,outbound,US,30,0.002,0,4000\n\
             c4,{B},,2026-11-19T12:00:00Z,voice,pstn,outbound,DE,60,0.02,0,4000\n"
        ),
    );
    write(
        d,
        "endpoints.csv",
        &format!(
            "endpoint_id,auth_id,sub_account,alias,username,password,application_id\n\
             E1,{A},,Desk,desk1,secret,APP1\nE2,{A},SA1,Phone,phone2,hunter2,\nE3,{A},,Old,old3,pw,\n\
             EB,{B},,Other,otherb,pw,\n"
        ),
    );
    write(
        d,
        "registrations.csv",
        "endpoint_id,sip_contact,sip_expires,sip_user_agent\n\
         E1,sip:desk1@192.0.2.10:5060,2026-11-21T12:00:00Z,Linphone/5.2\n\
         E3,sip:old3@192.0.2.11,2026-11-20T23:59:59Z,Old/1.0\n",
    );
    let header = "recording_id,auth_id,subaccount_auth,call_uuid,from_number,to_number,conference_name,conference_uuid,\
                  mpc_name,mpc_uuid,recording_url,recording_format,recording_type,recording_start_ms,recording_end_ms,add_time\n";
    let mut rows = String::from(header);
    rows.push_str(&format!(
        "R1,{A},,C1,+15550001,+15550002,,,,,https://r/1.mp3,mp3,normal,1763646301000,1763646646100,2026-11-20T13:45:01.123456Z\n\
         R2,{A},SA1,C2,+15550001,+15550003,room,CU1,,,https://r/2.wav,wav,conference,1763560000000,1763560001000.5,2026-11-19 10:00:00\n\
         R3,{A},,C2,+15550004,sip:desk1@x,,,mpc1,MU1,https://r/3.mp3,mp3,normal,1755000000000,1755000029000,2026-08-01T00:00:00Z\n\
         RB,{B},,CB,+4930,+4931,,,,,https://r/b.mp3,mp3,normal,1763646301000,1763646302000,2026-11-20T13:45:01Z\n"
    ));
    // Ten more recordings of A for paging, one per hour of 2026-11-18.
    for i in 0..10 {
        rows.push_str(&format!(
            "P{i:02},{A},,CP{i},+1,+2,,,,,https://r/p{i}.mp3,mp3,normal,1763424000000,1763424060000,2026-11-18T{i:02}:00:00Z\n"
        ));
    }
    write(d, "recordings/2026/recordings.csv", &rows);
    dir
}

/// A running `telemeter serve`.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) addr: SocketAddr,
    logs: Arc<Mutex<Vec<String>>>,
}

impl Server {
    pub(crate) fn start(data: &Path, db: &Path, listen: &str, extra: &[&str]) -> Server {
        let mut args = vec!["--data".into(), data.as_os_str().to_owned(), "--db".into(), db.as_os_str().to_owned()];
        args.extend(extra.iter().map(Into::into));
        Server::start_with(listen, &args)
    }

    pub(crate) fn start_with(listen: &str, args: &[std::ffi::OsString]) -> Server {
        Server::start_command(crate::common::command(), listen, args)
    }

    /// `command serve ARGS`: `command` is the binary, or a shell that
    /// `exec`s it (to set limits first); run with the tests' state
    /// directory and no configured page-token key.
    pub(crate) fn start_command(mut command: Command, listen: &str, args: &[std::ffi::OsString]) -> Server {
        let mut child = command
            .env_remove("TELEMETER_TOKEN_KEY")
            .env("TELEMETER_STATE_DIR", crate::common::state_dir())
            .arg("serve")
            .args(args)
            .args(["--listen", listen, "--now", NOW, "--sip-domain", "sip.example.com"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let logs = Arc::new(Mutex::new(Vec::new()));
        let deadline = Instant::now() + Duration::from_secs(60);
        let addr = loop {
            let mut line = String::new();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "server exited: {:?}", logs.lock().unwrap());
            logs.lock().unwrap().push(line.clone());
            if let Ok(event) = serde_json::from_str::<Value>(&line) {
                if event["event"] == "listening" {
                    break event["addr"].as_str().unwrap().parse().unwrap();
                }
            }
            assert!(Instant::now() < deadline, "server did not start");
        };
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        let server = Server { child, addr, logs };
        let health = server.client().request("GET", "/healthz", &[]).unwrap();
        assert_eq!(health.status, 200);
        server
    }

    /// The log lines, once `ready` holds for them (the log is read by a
    /// thread, a little after the responses).
    pub(crate) fn logs_when(&self, ready: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let logs = self.logs.lock().unwrap().clone();
            if ready(&logs) || Instant::now() > deadline {
                return logs;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn client(&self) -> Client {
        Client::new(self.addr)
    }

    /// SIGTERM, then wait for a clean exit.
    pub(crate) fn stop(mut self) {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
        let code = self.child.wait().unwrap();
        assert!(code.success(), "{code:?}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn basic(user: &str, token: &str) -> String {
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{token}")))
}

/// GET with Basic auth; spaces in `path` are sent as `%20`.
pub(crate) fn get(client: &mut Client, path: &str, auth: &str) -> Response {
    client.request("GET", &path.replace(' ', "%20"), &[("Authorization", auth)]).unwrap()
}

pub(crate) fn json(response: &Response) -> Value {
    serde_json::from_slice(&response.body).unwrap_or_else(|e| panic!("{e}: {}", response.text()))
}

/// An error answer: the status, the body shape and the message.
pub(crate) fn assert_error(response: &Response, status: u16, message: &str) {
    assert_eq!(response.status, status, "{}", response.text());
    assert_eq!(response.header("content-type"), Some("application/json"));
    let body = json(response);
    let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["api_id", "error"], "{body}");
    assert_eq!(body["api_id"].as_str().unwrap().len(), 36);
    assert!(body["error"].as_str().unwrap().contains(message), "{body}");
}

pub(crate) fn started() -> (tempfile::TempDir, Server) {
    let data = data_dir();
    let db = data.path().join("state/db.sqlite");
    let server = Server::start(data.path(), &db, "127.0.0.1:0", &[]);
    (data, server)
}

#[test]
fn endpoints_in_both_shapes() {
    let (_data, server) = started();
    let mut c = server.client();
    let auth = basic(A, "token-a");
    let registered = get(&mut c, &format!("/v1/Account/{A}/Endpoint/E1/"), &auth);
    assert_eq!(registered.status, 200);
    assert_eq!(
        registered.text(),
        format!(
            r#"{{"alias":"Desk","application":"/v1/Account/{A}/Application/APP1/","endpoint_id":"E1","resource_uri":"/v1/Account/{A}/Endpoint/E1/","sip_registered":"true","sip_uri":"sip:desk1@sip.example.com","sub_account":null,"username":"desk1","sip_contact":"sip:desk1@192.0.2.10:5060","sip_expires":"2026-11-21 12:00:00","sip_user_agent":"Linphone/5.2"}}"#
        )
    );
    // Without the trailing slash; the registration has a sub-account.
    let unregistered = json(&get(&mut c, &format!("/v1/Account/{A}/Endpoint/E2"), &auth));
    assert_eq!(unregistered["sip_registered"], "false");
    assert_eq!(unregistered["password"], "2ab96390c7dbe3439de74d0c9b0b1767"); // md5("hunter2")
    assert_eq!(unregistered["sub_account"], "SA1");
    assert_eq!(unregistered["application"], "");
    assert!(unregistered["api_id"].is_string());
    assert!(unregistered.get("sip_contact").is_none());
    // E3's registration expired before now: unregistered.
    let expired = json(&get(&mut c, &format!("/v1/Account/{A}/Endpoint/E3/"), &auth));
    assert_eq!(expired["sip_registered"], "false");
    assert_eq!(expired["password"], md5_hex("pw"));
    // Unknown, or another account's: 404.
    assert_error(&get(&mut c, &format!("/v1/Account/{A}/Endpoint/NOPE/"), &auth), 404, "not found");
    assert_error(&get(&mut c, &format!("/v1/Account/{A}/Endpoint/EB/"), &auth), 404, "not found");
    // The plain password never leaves the server.
    for line in server.logs_when(|logs| logs.iter().filter(|l| l.contains("\"method\"")).count() >= 6).iter() {
        assert!(!line.contains("hunter2") && !line.contains("token-a"), "{line}");
    }
}

/// `keys` are all in the JSON `text`, in this order, and no other key is.
fn assert_key_order(text: &str, keys: &[&str]) {
    let value: Value = serde_json::from_str(&format!("{}}}", text.trim_end_matches('}'))).unwrap();
    assert_eq!(value.as_object().unwrap().len(), keys.len(), "{text}");
    let places: Vec<usize> = keys.iter().map(|k| text.find(&format!("\"{k}\":")).unwrap()).collect();
    assert!(places.windows(2).all(|w| w[0] < w[1]), "{text}");
}

fn md5_hex(text: &str) -> String {
    use md5::Digest as _;
    md5::Md5::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn recordings_single_list_filters_and_pages() {
    let (_data, server) = started();
    let mut c = server.client();
    let auth = basic(A, "token-a");
    let base = format!("/v1/Account/{A}/Recording/");
    let response = get(&mut c, &format!("{base}R2/"), &auth);
    let one = json(&response);
    assert_key_order(
        &response.text(),
        &[
            "recording_id",
            "call_uuid",
            "conference_name",
            "recording_url",
            "recording_format",
            "recording_type",
            "recording_duration_ms",
            "rounded_recording_duration",
            "recording_storage_duration",
            "recording_storage_rate",
            "monthly_recording_storage_amount",
            "add_time",
            "api_id",
            "resource_uri",
            "recording_start_ms",
            "recording_end_ms",
        ],
    );
    assert_eq!(one["conference_name"], "room");
    assert_eq!(one["recording_duration_ms"], "1000.50000");
    assert_eq!(one["rounded_recording_duration"], 60);
    assert_eq!(one["recording_storage_duration"], 2); // 38 hours stored
    assert_eq!(one["add_time"], "2026-11-19 10:00:00.000000+00:00");
    assert_eq!(one["recording_end_ms"], "1763560001000.50000");
    assert_eq!(one["resource_uri"], format!("/v1/Account/{A}/Recording/R2/"));
    // R3 is 112 days old: storage is charged (rate x 1 rounded minute).
    let old = json(&get(&mut c, &format!("{base}R3"), &auth));
    assert_eq!(
        (old["recording_storage_duration"].as_i64(), old["monthly_recording_storage_amount"].as_str()),
        (Some(113), Some("0.0004"))
    );
    assert_eq!(old["conference_name"], Value::Null);
    assert_error(&get(&mut c, &format!("{base}RB/"), &auth), 404, "not found");

    // The default window is the last 7 days: R3 (August) is not listed.
    let response = get(&mut c, &base, &auth);
    let list = json(&response);
    assert_eq!(list["meta"]["total_count"], 12);
    assert_eq!(list["meta"]["limit"], 20);
    assert_eq!(list["meta"]["next"], Value::Null);
    let ids: Vec<&str> =
        list["objects"].as_array().unwrap().iter().map(|o| o["recording_id"].as_str().unwrap()).collect();
    assert_eq!(ids[..3], ["R1", "R2", "P09"]);
    let first_item = response.text().split("\"objects\":[").nth(1).unwrap().split('}').next().unwrap().to_owned();
    assert_key_order(
        &first_item,
        &[
            "add_time",
            "call_uuid",
            "conference_name",
            "recording_duration_ms",
            "recording_format",
            "recording_id",
            "recording_type",
            "recording_url",
        ],
    );
    // Pages: limit and offset, next and previous keep the filters.
    let page = json(&get(&mut c, &format!("/v1/Account/{A}/Recording?limit=5&offset=3&from_number=%2B1"), &auth));
    assert_eq!(page["meta"]["total_count"], 10);
    assert_eq!(page["meta"]["next"], format!("/v1/Account/{A}/Recording/?from_number=%2B1&limit=5&offset=8"));
    assert_eq!(page["meta"]["previous"], format!("/v1/Account/{A}/Recording/?from_number=%2B1&limit=5&offset=0"));
    assert_eq!(page["objects"][0]["recording_id"], "P06");
    let next = json(&get(&mut c, page["meta"]["next"].as_str().unwrap(), &auth));
    assert_eq!((next["objects"].as_array().unwrap().len(), &next["meta"]["next"]), (2, &Value::Null));
    assert_eq!(next["objects"][1]["recording_id"], "P00");
    // Every exact filter.
    let count = |c: &mut Client, query: &str| {
        let response = get(c, &format!("{base}?{query}"), &auth);
        json(&response)["meta"]["total_count"].as_u64().unwrap_or_else(|| panic!("{query}: {}", response.text()))
    };
    assert_eq!(count(&mut c, "call_uuid=C2"), 1);
    assert_eq!(count(&mut c, "subaccount=SA1"), 1);
    assert_eq!(count(&mut c, "to_number=%2B15550002"), 1);
    assert_eq!(count(&mut c, "conference_name=room&conference_uuid=CU1"), 1);
    assert_eq!(count(&mut c, "conference_name=nothing"), 0);
    assert_eq!(count(&mut c, "mpc_name=mpc1"), 0); // R3 is older than 7 days
    assert_eq!(
        count(&mut c, "mpc_name=mpc1&mpc_uuid=MU1&add_time__gte=2026-07-20%2000:00&add_time__lt=2026-08-15 00:00"),
        1
    );
    // add_time forms.
    assert_eq!(count(&mut c, "add_time=2026-11-18 03:00"), 1);
    assert_eq!(count(&mut c, "add_time=2026-11-20 13:45:01.123456"), 1);
    assert_eq!(count(&mut c, "add_time__gt=2026-11-18 05:00:00&add_time__lte=2026-11-18 09:00:00"), 4);
    // Storage duration (days stored): a time filter of its own.
    assert_eq!(count(&mut c, "recording_storage_duration__gt=90"), 1);
    assert_eq!(count(&mut c, "recording_storage_duration=2"), 1);
    // P00 was added exactly 72 hours before now: its 4th day of storage.
    assert_eq!(count(&mut c, "recording_storage_duration__lte=3"), 11);
    // The 400s name the parameter.
    assert_error(&get(&mut c, &format!("{base}?limit=21"), &auth), 400, "invalid limit '21'");
    assert_error(&get(&mut c, &format!("{base}?offset=x"), &auth), 400, "invalid offset 'x'");
    assert_error(&get(&mut c, &format!("{base}?add_time__gte=2026-10-01 00:00"), &auth), 400, "at most 30 days");
    assert_error(&get(&mut c, &format!("{base}?add_time=yesterday"), &auth), 400, "invalid add_time 'yesterday'");
    assert_error(
        &get(&mut c, &format!("{base}?add_time__gte=2026-11-01 00:00&recording_storage_duration=1"), &auth),
        400,
        "cannot be combined",
    );
}

#[test]
fn delete_is_permanent_across_restarts_and_reloads() {
    let data = data_dir();
    let db = data.path().join("state/db.sqlite");
    let server = Server::start(data.path(), &db, "127.0.0.1:0", &[]);
    let mut c = server.client();
    let auth = basic(A, "token-a");
    let path = format!("/v1/Account/{A}/Recording/R1/");
    // Another account cannot delete it.
    assert_error(
        &c.request("DELETE", &path.replace(A, B), &[("Authorization", &basic(B, "token-b"))]).unwrap(),
        403,
        "not allowed",
    );
    let deleted = c.request("DELETE", &path, &[("Authorization", &auth)]).unwrap();
    assert_eq!(deleted.status, 204);
    assert!(deleted.body.is_empty());
    assert_error(&c.request("DELETE", &path, &[("Authorization", &auth)]).unwrap(), 404, "not found");
    assert_error(
        &c.request("DELETE", &format!("/v1/Account/{A}/Recording/NOPE"), &[("Authorization", &auth)]).unwrap(),
        404,
        "not found",
    );
    server.stop();
    // Restart on the same database: the files are loaded again.
    let server = Server::start(data.path(), &db, "127.0.0.1:0", &[]);
    let mut c = server.client();
    assert_error(&get(&mut c, &path, &auth), 404, "not found");
    let list = json(&get(&mut c, &format!("/v1/Account/{A}/Recording/"), &auth));
    assert_eq!(list["meta"]["total_count"], 11);
    assert!(server.logs.lock().unwrap().iter().any(|l| l.contains("\"deleted_skipped\":1")));
}

#[test]
fn usage_summary_is_the_summary_commands_answer() {
    let (data, server) = started();
    let mut c = server.client();
    let auth = basic(A, "token-a");
    for query in [
        "",
        "granularity=month&from_date=2026-11-01&to_date=2026-12-01",
        "product=voice&page_size=1&auth_id=MBBBBBBBBBBBBBBBBBBB",
    ] {
        let response = get(&mut c, &format!("/v1/Account/{A}/UsageSummary/?{query}"), &auth);
        assert_eq!(response.status, 200, "{}", response.text());
        let output = crate::common::command()
            .args(["summary", "--data"])
            .arg(data.path())
            .args(["--auth-id", A, "--query", query, "--now", NOW])
            .output()
            .unwrap();
        assert!(output.status.success());
        let cli = String::from_utf8(output.stdout).unwrap();
        let cli = cli.trim_end_matches('\n');
        let cli_api_id = serde_json::from_str::<Value>(cli).unwrap()["api_id"].as_str().unwrap().to_owned();
        let server_api_id = json(&response)["api_id"].as_str().unwrap().to_owned();
        assert_ne!(server_api_id, cli_api_id);
        assert_eq!(response.text().replacen(&server_api_id, &cli_api_id, 1), cli, "query {query}");
    }
    // The query's page_token works across requests (page 2 of the last one).
    let first = json(&get(&mut c, &format!("/v1/Account/{A}/UsageSummary?product=voice&page_size=1"), &auth));
    let token = first["meta"]["next_page_token"].as_str().unwrap();
    let second =
        get(&mut c, &format!("/v1/Account/{A}/UsageSummary?product=voice&page_size=1&page_token={token}"), &auth);
    assert_eq!(second.status, 200);
    assert!(json(&second)["meta"].get("total_spend").is_none());
    assert_error(
        &get(&mut c, &format!("/v1/Account/{A}/UsageSummary/?granularity=week"), &auth),
        400,
        "invalid granularity 'week'",
    );
    assert_error(
        &get(
            &mut c,
            &format!("/v1/Account/{A}/UsageSummary/?granularity=hour&from_date=2026-11-01&to_date=2026-11-11"),
            &auth,
        ),
        400,
        "use granularity 'day'",
    );
}

#[test]
fn serves_an_ingested_store_and_deletes_survive_re_ingest() {
    let data = data_dir();
    let store = data.path().join("store");
    let ingest = || {
        let output = crate::common::command()
            .args(["ingest", "--data"])
            .arg(data.path())
            .arg("--store")
            .arg(&store)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    };
    ingest();
    let serve = || Server::start_with("127.0.0.1:0", &["--store".into(), store.as_os_str().to_owned()]);
    let server = serve();
    let mut c = server.client();
    let auth = basic(A, "token-a");
    let query = "granularity=day&from_date=2026-11-15&to_date=2026-11-21";
    let response = get(&mut c, &format!("/v1/Account/{A}/UsageSummary/?{query}"), &auth);
    assert_eq!(response.status, 200, "{}", response.text());
    let output = crate::common::command()
        .args(["summary", "--data"])
        .arg(data.path())
        .args(["--auth-id", A, "--query", query, "--now", NOW])
        .output()
        .unwrap();
    let cli: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut served = json(&response);
    served["api_id"] = cli["api_id"].clone();
    assert_eq!(served, cli);
    assert_eq!(served["usage"].as_array().unwrap().len(), 3);
    // ingest loaded the resources into the store's database.
    assert_eq!(get(&mut c, &format!("/v1/Account/{A}/Endpoint/E1/"), &auth).status, 200);
    let path = format!("/v1/Account/{A}/Recording/R1/");
    assert_eq!(c.request("DELETE", &path, &[("Authorization", &auth)]).unwrap().status, 204);
    server.stop();
    ingest();
    let server = serve();
    assert_error(&get(&mut server.client(), &path, &auth), 404, "not found");
}

#[test]
fn basic_auth_edge_cases_are_401() {
    let (_data, server) = started();
    let mut c = server.client();
    let path = format!("/v1/Account/{A}/UsageSummary/");
    let cases: [&[(&str, &str)]; 8] = [
        &[],
        &[("Authorization", "")],
        &[("Authorization", "Bearer token-a")],
        &[("Authorization", "Basic !!!notbase64")],
        &[("Authorization", &basic(A, "wrong"))],
        &[("Authorization", &basic(A, ""))],
        &[("Authorization", &basic(B, "token-b"))],
        &[("Authorization", "Basic TUFBQUFBQUFBQUFBQUFBQUFBQUF0b2tlbi1h")], // no ':'
    ];
    for headers in cases {
        let response = c.request("GET", &path, headers).unwrap();
        assert_error(&response, 401, "invalid auth ID or auth token");
        assert_eq!(response.header("www-authenticate"), Some("Basic realm=\"telemeter\""));
    }
    // Scheme is case-insensitive; the path account is the one checked.
    assert_eq!(
        c.request("GET", &path, &[("Authorization", &basic(A, "token-a").replace("Basic", "basic"))]).unwrap().status,
        200
    );
    for op in ["Endpoint/E1/", "Recording/", "Recording/R1/"] {
        assert_error(&get(&mut c, &format!("/v1/Account/{A}/{op}"), &basic(A, "token-b")), 401, "invalid");
    }
    assert_error(&c.request("DELETE", &format!("/v1/Account/{A}/Recording/R1/"), &[]).unwrap(), 401, "invalid");
    // Unauthenticated requests do not count towards the rate limit: the
    // 9 above leave all 20 for the account.
    for _ in 0..19 {
        assert_eq!(get(&mut c, &path, &basic(A, "token-a")).status, 200);
    }
    let logs = server.logs_when(|logs| logs.iter().filter(|l| l.contains("\"method\"")).count() >= 33);
    assert!(logs.iter().all(|l| !l.contains("token-a") && !l.contains("Basic")));
}

#[test]
fn the_twenty_first_summary_in_a_minute_is_429() {
    let (_data, server) = started();
    let mut c = server.client();
    let path = format!("/v1/Account/{A}/UsageSummary/");
    for i in 0..20 {
        // 400s count too: they are authenticated requests.
        let query = if i == 0 { "?granularity=week" } else { "" };
        let status = get(&mut c, &format!("{path}{query}"), &basic(A, "token-a")).status;
        assert_eq!(status, if i == 0 { 400 } else { 200 });
    }
    let refused = get(&mut c, &path, &basic(A, "token-a"));
    assert_error(&refused, 429, "rate limit");
    let retry: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // Other operations and other accounts are not limited.
    assert_eq!(get(&mut c, &format!("/v1/Account/{A}/Recording/"), &basic(A, "token-a")).status, 200);
}

/// Two servers of one data folder (as behind a load balancer) share the
/// limit: an account gets 20 summaries a minute between them, not 20 from
/// each.
#[test]
fn two_servers_share_the_rate_limit() {
    let data = data_dir();
    let db = data.path().join("state/db.sqlite");
    let one = Server::start(data.path(), &db, "127.0.0.1:0", &[]);
    let two = Server::start(data.path(), &db, "127.0.0.1:0", &[]);
    let (mut a, mut b) = (one.client(), two.client());
    let path = format!("/v1/Account/{A}/UsageSummary/");
    let mut statuses = std::collections::BTreeMap::new();
    for i in 0..30 {
        let client = if i % 2 == 0 { &mut a } else { &mut b };
        *statuses.entry(get(client, &path, &basic(A, "token-a")).status).or_insert(0) += 1;
    }
    assert_eq!(statuses, std::collections::BTreeMap::from([(200, 20), (429, 10)]));

    // The schema states the limit the server keeps.
    let three = Server::start(data.path(), &db, "127.0.0.1:0", &["--rate-limit", "3"]);
    let openapi = json(&three.client().request("GET", "/openapi.json", &[]).unwrap());
    let text = openapi.to_string();
    assert!(
        text.contains("rate limit: 3 requests per 60 s") && text.contains("More than 3 requests in 60 s"),
        "{text}"
    );
}

#[test]
fn allowlists_over_ipv6_and_a_trusted_proxy() {
    let data = data_dir();
    let db = data.path().join("state/db.sqlite");
    let server = Server::start(data.path(), &db, "[::1]:0", &[]);
    assert!(server.addr.is_ipv6());
    let mut c = server.client();
    // B allows ::1 only; C allows IPv4 blocks only; A allows any.
    assert_eq!(get(&mut c, &format!("/v1/Account/{B}/Recording/RB/"), &basic(B, "token-b")).status, 200);
    assert_error(&get(&mut c, &format!("/v1/Account/{C}/UsageSummary/"), &basic(C, "token-c")), 403, "not allowed");
    assert_error(&get(&mut c, &format!("/v1/Account/{C}/Endpoint/E1/"), &basic(C, "token-c")), 403, "not allowed");
    assert_eq!(get(&mut c, &format!("/v1/Account/{A}/UsageSummary/"), &basic(A, "token-a")).status, 200);
    // Forwarded headers are ignored unless trusted.
    let forwarded = |c: &mut Client, who: &str, token: &str, from: &str| {
        c.request(
            "GET",
            &format!("/v1/Account/{who}/UsageSummary/"),
            &[("Authorization", &basic(who, token)), ("X-Forwarded-For", from)],
        )
        .unwrap()
        .status
    };
    assert_eq!(forwarded(&mut c, C, "token-c", "10.1.2.3"), 403);
    server.stop();

    let server = Server::start(data.path(), &db, "127.0.0.1:0", &["--trust-proxy-header", "X-Forwarded-For"]);
    let mut c = server.client();
    assert_eq!(forwarded(&mut c, C, "token-c", "10.1.2.3"), 200);
    assert_eq!(forwarded(&mut c, C, "token-c", "203.0.113.5, 192.0.2.44"), 200);
    assert_eq!(forwarded(&mut c, C, "token-c", "10.1.2.3, 203.0.113.5"), 403);
    assert_eq!(forwarded(&mut c, C, "token-c", "garbage"), 403);
    assert_eq!(forwarded(&mut c, B, "token-b", "::1"), 200);
    // No header: the socket peer (127.0.0.1, not on C's list).
    assert_error(&get(&mut c, &format!("/v1/Account/{C}/UsageSummary/"), &basic(C, "token-c")), 403, "not allowed");
}

#[test]
fn routing_errors_health_and_openapi() {
    let (_data, server) = started();
    let mut c = server.client();
    let auth = basic(A, "token-a");
    assert_eq!(json(&c.request("GET", "/healthz", &[]).unwrap())["status"], "ok");
    assert_error(&get(&mut c, "/v1/Account/", &auth), 404, "not found");
    assert_error(&get(&mut c, &format!("/v1/Account/{A}/Nothing/"), &auth), 404, "not found");
    assert_error(&get(&mut c, &format!("/v2/Account/{A}/UsageSummary/"), &auth), 404, "not found");
    let wrong = c.request("POST", &format!("/v1/Account/{A}/Recording/"), &[("Authorization", &auth)]).unwrap();
    assert_error(&wrong, 405, "method not allowed");
    assert_error(
        &c.request("DELETE", &format!("/v1/Account/{A}/Endpoint/E1/"), &[("Authorization", &auth)]).unwrap(),
        405,
        "method not allowed",
    );
    assert_error(
        &c.request("PUT", &format!("/v1/Account/{A}/UsageSummary"), &[("Authorization", &auth)]).unwrap(),
        405,
        "method not allowed",
    );
    let openapi = json(&c.request("GET", "/openapi.json", &[]).unwrap());
    assert!(openapi["openapi"].as_str().unwrap().starts_with("3."));
    let summary = &openapi["paths"]["/v1/Account/{auth_id}/UsageSummary/"]["get"]["summary"];
    assert!(summary.as_str().unwrap().contains("rate limit: 20 requests per 60 s"), "{summary}");
    let paths = openapi["paths"].as_object().unwrap();
    for path in [
        "/v1/Account/{auth_id}/UsageSummary/",
        "/v1/Account/{auth_id}/Endpoint/{endpoint_id}/",
        "/v1/Account/{auth_id}/Recording/",
        "/v1/Account/{auth_id}/Recording/{recording_id}/",
        "/healthz",
        "/openapi.json",
    ] {
        assert!(paths.contains_key(path), "{path}");
    }
    assert!(paths["/v1/Account/{auth_id}/Recording/{recording_id}/"]["delete"]["responses"]["204"].is_object());
    // Exactly the server's operations, each documented with the statuses it answers.
    let operations: Vec<String> = paths
        .iter()
        .flat_map(|(path, item)| item.as_object().unwrap().keys().map(move |method| format!("{method} {path}")))
        .collect();
    assert_eq!(operations.len(), 7, "{operations:?}");
    for (path, method, statuses) in [
        ("/v1/Account/{auth_id}/UsageSummary/", "get", &["200", "400", "401", "403", "414", "429", "431", "502"][..]),
        ("/v1/Account/{auth_id}/Endpoint/{endpoint_id}/", "get", &["200", "401", "403", "404", "414", "431", "502"]),
        ("/v1/Account/{auth_id}/Recording/", "get", &["200", "400", "401", "403", "414", "431", "502"]),
        ("/v1/Account/{auth_id}/Recording/{recording_id}/", "get", &["200", "401", "403", "404", "414", "431", "502"]),
        (
            "/v1/Account/{auth_id}/Recording/{recording_id}/",
            "delete",
            &["204", "401", "403", "404", "414", "431", "502"],
        ),
        ("/healthz", "get", &["200", "414", "431"]),
        ("/openapi.json", "get", &["200", "414", "431"]),
    ] {
        let responses = paths[path][method]["responses"].as_object().unwrap();
        let documented: Vec<&str> = responses.keys().map(String::as_str).collect();
        assert_eq!(documented, statuses, "{method} {path}");
    }
    // Every request is logged once with its fields.
    let logs = server.logs_when(|logs| logs.iter().filter(|l| l.contains("\"method\"")).count() >= 9);
    let requests: Vec<Value> = logs
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("method").is_some())
        .collect();
    assert!(requests.len() >= 8);
    for line in &requests {
        for key in ["method", "path", "status", "latency_ms", "api_id"] {
            assert!(line.get(key).is_some(), "{line}");
        }
    }
}

#[test]
fn engine_failures_are_502_with_a_generic_message() {
    let (data, server) = started();
    let mut c = server.client();
    // A record the engine refuses, written after startup.
    write(data.path(), "calls/2026/bad.csv", "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,surcharge,hangup_cause\nbad1,MAAAAAAAAAAAAAAAAAAA,,2026-11-19T10:00:00Z,voice,pstn,outbound,US,60,1.2e3,0,4000\n");
    let response = get(&mut c, &format!("/v1/Account/{A}/UsageSummary/"), &basic(A, "token-a"));
    assert_error(&response, 502, "failed to answer");
    assert!(!response.text().contains("bad.csv"));
    let logs = server.logs_when(|logs| logs.iter().any(|l| l.contains("\"status\":502")));
    assert!(logs.iter().any(|l| l.contains("\"status\":502") && l.contains("bad.csv")), "{logs:?}");
}

/// `telemeter ingest --data DATA --store STORE`, insisting on success; stdout.
fn ingest_into(data: &Path, store: &Path) -> String {
    let output =
        crate::common::command().args(["ingest", "--data"]).arg(data).arg("--store").arg(store).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

const RECORDINGS_HEADER: &str = "recording_id,auth_id,subaccount_auth,call_uuid,from_number,to_number,conference_name,\
    conference_uuid,mpc_name,mpc_uuid,recording_url,recording_format,recording_type,recording_start_ms,recording_end_ms,add_time\n";

/// One recording of A, `id`, added at `add_time`.
fn recording_row(id: &str, add_time: &str) -> String {
    format!("{id},{A},,C{id},+1,+2,,,,,https://r/{id}.mp3,mp3,normal,1763646301000,1763646302000,{add_time}\n")
}

#[test]
fn a_folder_of_recordings_only_keeps_the_stored_endpoints_and_registrations() {
    let data = data_dir();
    let temp = tempfile::tempdir().unwrap();
    let store = temp.path().join("store");
    ingest_into(data.path(), &store);
    // The next day brings recordings only.
    let day = temp.path().join("day");
    write(
        &day,
        "recordings/2026/11/20.csv",
        &format!("{RECORDINGS_HEADER}{}", recording_row("R9", "2026-11-20T20:00:00Z")),
    );
    let stdout = ingest_into(&day, &store);
    assert!(!stdout.contains("nothing new"), "{stdout}");
    assert!(stdout.contains("published generation 2"), "{stdout}");

    let server = Server::start_with("127.0.0.1:0", &["--store".into(), store.as_os_str().to_owned()]);
    let mut c = server.client();
    let auth = basic(A, "token-a");
    let endpoint = get(&mut c, &format!("/v1/Account/{A}/Endpoint/E1/"), &auth);
    assert_eq!(endpoint.status, 200, "{}", endpoint.text());
    assert_eq!(json(&endpoint)["sip_registered"], "true", "the registration is kept too");
    assert_eq!(get(&mut c, &format!("/v1/Account/{A}/Recording/R9/"), &auth).status, 200);
    // Recordings add up like records: the first day's are still there.
    assert_eq!(get(&mut c, &format!("/v1/Account/{A}/Recording/R1/"), &auth).status, 200);
}

/// Every SQLite database under `dir`.
fn databases(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return found };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(databases(&path));
        } else if path.extension().is_some_and(|e| e == "sqlite") {
            found.push(path);
        }
    }
    found
}

/// Whether any database of `store` holds recording `id` (committed): the
/// moment an ingest has written its resources somewhere.
fn holds_recording(store: &Path, id: &str) -> bool {
    databases(store).iter().any(|path| {
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
        let Ok(db) = rusqlite::Connection::open_with_flags(path, flags) else { return false };
        let count =
            db.query_row("SELECT COUNT(*) FROM recordings WHERE recording_id = ?1", [id], |r| r.get::<_, i64>(0));
        count.is_ok_and(|n| n > 0)
    })
}

#[test]
fn a_killed_ingest_leaves_the_resources_as_they_were() {
    let data = data_dir();
    let temp = tempfile::tempdir().unwrap();
    let store = temp.path().join("store");
    ingest_into(data.path(), &store);
    let server = Server::start_with("127.0.0.1:0", &["--store".into(), store.as_os_str().to_owned()]);
    let auth = basic(A, "token-a");
    let listing = format!("/v1/Account/{A}/Recording/");
    let before = json(&get(&mut server.client(), &listing, &auth))["meta"]["total_count"].clone();
    server.stop();

    // A big day (so that the run lasts), a moved endpoint and a new recording.
    let big = temp.path().join("big");
    let output = crate::common::command()
        .args(["generate", "--out"])
        .arg(&big)
        .args(["--calls", "300000", "--messages", "100000", "--transcriptions", "10000", "--charges", "1000"])
        .args(["--accounts", "40", "--start", "2026-08-01", "--days", "20", "--seed", "9"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    std::fs::remove_file(big.join("accounts.csv")).unwrap();
    write(
        &big,
        "endpoints.csv",
        &format!(
            "endpoint_id,auth_id,sub_account,alias,username,password,application_id\nE1,{A},,Moved,desk1,secret,APP1\n"
        ),
    );
    write(&big, "recordings/new.csv", &format!("{RECORDINGS_HEADER}{}", recording_row("RNEW", "2026-11-20T20:00:00Z")));

    let manifest = || std::fs::read(store.join("manifest.json")).unwrap();
    let manifest_before = manifest();
    let mut child = crate::common::command()
        .args(["ingest", "--data"])
        .arg(&big)
        .arg("--store")
        .arg(&store)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed (SIGKILL) as soon as it has written its resources anywhere.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !holds_recording(&store, "RNEW") && Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let exited = child.try_wait().unwrap();
    child.kill().ok();
    child.wait().unwrap();
    assert_eq!(exited, None, "the run ended before it wrote resources");
    assert_eq!(manifest(), manifest_before, "the run was killed before it published");

    let server = Server::start_with("127.0.0.1:0", &["--store".into(), store.as_os_str().to_owned()]);
    let mut c = server.client();
    assert_eq!(json(&get(&mut c, &format!("/v1/Account/{A}/Endpoint/E1/"), &auth))["alias"], "Desk");
    assert_error(&get(&mut c, &format!("{listing}RNEW/"), &auth), 404, "not found");
    assert_eq!(json(&get(&mut c, &listing, &auth))["meta"]["total_count"], before);
    server.stop();
    // The next ingest publishes the day on top of what the killed run left.
    ingest_into(&big, &store);
    let server = Server::start_with("127.0.0.1:0", &["--store".into(), store.as_os_str().to_owned()]);
    let mut c = server.client();
    assert_eq!(json(&get(&mut c, &format!("/v1/Account/{A}/Endpoint/E1/"), &auth))["alias"], "Moved");
    assert_eq!(get(&mut c, &format!("{listing}RNEW/"), &auth).status, 200);
}

#[test]
fn serve_refuses_tokens_sealed_with_the_public_key_of_earlier_versions() {
    let (_data, server) = started();
    let mut c = server.client();
    let auth = basic(A, "token-a");
    let query = "granularity=year&page_size=1&product=voice";
    let digest = telemeter::query::UsageParams::parse_query(query).unwrap().digest(A);
    let days = |y, m, d| chrono::Datelike::num_days_from_ce(&chrono::NaiveDate::from_ymd_opt(y, m, d).unwrap());
    let token =
        crate::common::forged_v1(&crate::common::public_key(), 1, days(-261_826, 12, 15), days(2027, 1, 1), digest);
    let response = get(&mut c, &format!("/v1/Account/{A}/UsageSummary/?{query}&page_token={token}"), &auth);
    assert_error(&response, 400, "page_token");
    assert!(!response.text().contains("-261826"));
}

#[test]
fn a_page_token_replayed_after_the_data_changed_is_a_400_from_the_server_too() {
    let (data, server) = started();
    let mut c = server.client();
    let auth = basic(A, "token-a");
    let query = "product=voice,zentrunk&page_size=2&from_date=2026-11-01&to_date=2026-11-21";
    let first = json(&get(&mut c, &format!("/v1/Account/{A}/UsageSummary/?{query}"), &auth));
    let token = first["meta"]["next_page_token"].as_str().unwrap().to_owned();
    let page = |c: &mut Client| get(c, &format!("/v1/Account/{A}/UsageSummary/?{query}&page_token={token}"), &auth);
    assert_eq!(page(&mut c).status, 200);
    // A call that sorts first, written after page 1.
    write(
        data.path(),
        "calls/2026/late.csv",
        &format!(
            "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,surcharge,hangup_cause\n\
             c0,{A},,2026-11-02T10:00:00Z,voice,pstn,outbound,US,60,0.013,0.001,4000\n"
        ),
    );
    assert_error(&page(&mut c), 400, "the data changed since it was issued");
}
