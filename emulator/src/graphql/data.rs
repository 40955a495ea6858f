//! The seeded store: static tables, compact per-finding records, rule records and seeding.
//!
//! Findings are 32-byte records; everything textual about a finding (finding_id, description,
//! tickets, comments, attachments) is derived at output time from the record and its `seed`,
//! so 1,000,000 findings fit in ~32 MB and seed in well under a second.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use super::util::{days_from_civil, mix, Rng, DAY};

// ------------------------------------------------------------------ static tables

pub struct Account {
    pub provider: &'static str,
    pub id: &'static str,
    pub name: &'static str,
    pub env: &'static str,
    pub regions: &'static [&'static str],
}

const AWS_REGIONS: &[&str] = &["eu-central-1", "us-east-1", "eu-west-1", "us-west-2"];
const AZ_REGIONS: &[&str] = &["westeurope", "northeurope", "eastus"];
const GCP_REGIONS: &[&str] = &["europe-west3", "us-central1"];

pub static ACCOUNTS: [Account; 13] = [
    Account { provider: "AWS", id: "314159265358", name: "prod-payments", env: "prod", regions: AWS_REGIONS },
    Account { provider: "AWS", id: "271828182845", name: "prod-core", env: "prod", regions: AWS_REGIONS },
    Account {
        provider: "AWS",
        id: "161803398874",
        name: "staging-core",
        env: "staging",
        regions: AWS_REGIONS,
    },
    Account { provider: "AWS", id: "141421356237", name: "dev-sandbox", env: "dev", regions: AWS_REGIONS },
    Account {
        provider: "AWS",
        id: "577215664901",
        name: "security-tooling",
        env: "prod",
        regions: AWS_REGIONS,
    },
    Account { provider: "AWS", id: "662607015004", name: "data-platform", env: "prod", regions: AWS_REGIONS },
    Account {
        provider: "Azure",
        id: "8f14e45f-ceea-467f-a0e6-0bc2d9f1c1a3",
        name: "azure-prod-eu",
        env: "prod",
        regions: AZ_REGIONS,
    },
    Account {
        provider: "Azure",
        id: "c9f0f895-fb98-4b9f-9f2e-3a1d4c5b6e7f",
        name: "azure-dev",
        env: "dev",
        regions: AZ_REGIONS,
    },
    Account {
        provider: "Azure",
        id: "45c48cce-2e2d-4fbd-aa1a-2f5e6d7c8b9a",
        name: "azure-corp-it",
        env: "prod",
        regions: AZ_REGIONS,
    },
    Account {
        provider: "GCP",
        id: "acme-analytics-prod",
        name: "analytics-prod",
        env: "prod",
        regions: GCP_REGIONS,
    },
    Account {
        provider: "GCP",
        id: "acme-ml-staging",
        name: "ml-staging",
        env: "staging",
        regions: GCP_REGIONS,
    },
    Account {
        provider: "GCP",
        id: "acme-web-prod-381204",
        name: "web-prod",
        env: "prod",
        regions: GCP_REGIONS,
    },
    Account {
        provider: "GitHub",
        id: "acme-corp",
        name: "GitHub acme-corp",
        env: "prod",
        regions: &["global"],
    },
];
const ACCOUNT_WEIGHTS: &[u32] = &[14, 12, 8, 6, 3, 8, 9, 4, 3, 8, 4, 6, 15];

pub const VM: u8 = 0;
pub const IMAGE: u8 = 1;
pub const BUCKET: u8 = 2;
pub const FUNCTION: u8 = 3;
pub const DATABASE: u8 = 4;
pub const IAM: u8 = 5;
pub const K8S: u8 = 6;
pub const REPO: u8 = 7;
pub const ASSET: u8 = 8;

pub const RTYPES: &[&str] = &[
    "VIRTUAL_MACHINE",
    "CONTAINER_IMAGE",
    "STORAGE_BUCKET",
    "SERVERLESS_FUNCTION",
    "DATABASE",
    "IAM_ROLE",
    "KUBERNETES_CLUSTER",
    "CODE_REPOSITORY",
    "ASSET",
];
/// Weights of the cloud resource types (all but CODE_REPOSITORY, which only GitHub has).
const CLOUD_RTYPE_WEIGHTS: &[u32] = &[30, 20, 10, 8, 6, 10, 2, 0, 14];

pub const APPS: &[&str] = &[
    "payments",
    "orders",
    "checkout",
    "identity",
    "search",
    "analytics",
    "billing",
    "inventory",
    "notifications",
    "reporting",
    "gateway",
    "catalog",
    "ml-pipeline",
    "web-frontend",
    "mobile-api",
    "data-lake",
];
pub const TEAMS: &[&str] = &["payments", "platform", "identity", "data", "web", "mobile"];

pub const VULN: u8 = 0;
pub const MISCONFIG: u8 = 1;
pub const SECRET: u8 = 2;
pub const CODE: u8 = 3;
pub const KINDS: &[&str] = &["VULNERABILITY", "MISCONFIGURATION", "SECRET", "CODE_WEAKNESS"];

pub struct Template {
    pub title: &'static str,
    pub kind: u8,
    pub package: Option<&'static str>,
    pub cve: Option<&'static str>,
    pub rtypes: &'static [u8],
    pub severity: u8,
    pub body: &'static str,
    pub remediation: &'static str,
}

const HOSTS: &[u8] = &[VM, IMAGE, ASSET];
const APPS_RT: &[u8] = &[IMAGE, REPO, FUNCTION];

macro_rules! vuln {
    ($title:expr, $pkg:expr, $cve:expr, $rt:expr, $sev:expr, $body:expr) => {
        Template {
            title: $title,
            kind: VULN,
            package: Some($pkg),
            cve: Some($cve),
            rtypes: $rt,
            severity: $sev,
            body: $body,
            remediation: "Upgrade `{package}` to the fixed version published by the vendor and redeploy the affected workload.",
        }
    };
}
macro_rules! conf {
    ($title:expr, $kind:expr, $rt:expr, $sev:expr, $body:expr, $fix:expr) => {
        Template {
            title: $title,
            kind: $kind,
            package: None,
            cve: None,
            rtypes: $rt,
            severity: $sev,
            body: $body,
            remediation: $fix,
        }
    };
}

pub static TEMPLATES: [Template; 34] = [
    vuln!("CVE-2023-44487 - HTTP/2 Rapid Reset in nghttp2", "nghttp2", "CVE-2023-44487", HOSTS, 4,
        "The HTTP/2 protocol allows a denial of service because request cancellation can reset many streams quickly."),
    vuln!("CVE-2024-3094 - Backdoor in xz-utils (liblzma)", "xz-utils", "CVE-2024-3094", HOSTS, 5,
        "Malicious code in the upstream tarballs of xz 5.6.0 and 5.6.1 modifies liblzma and can compromise sshd."),
    vuln!("CVE-2021-44228 - Log4Shell remote code execution in log4j-core", "log4j-core", "CVE-2021-44228", APPS_RT, 5,
        "JNDI features of Apache Log4j2 do not protect against attacker-controlled LDAP endpoints, allowing remote code execution."),
    vuln!("CVE-2022-22965 - Spring4Shell RCE in spring-beans", "spring-beans", "CVE-2022-22965", APPS_RT, 5,
        "A Spring MVC or WebFlux application on JDK 9+ may be vulnerable to remote code execution via data binding."),
    vuln!("CVE-2023-4863 - Heap buffer overflow in libwebp", "libwebp", "CVE-2023-4863", HOSTS, 4,
        "A heap buffer overflow in libwebp allows a remote attacker to write out of bounds via a crafted WebP image."),
    vuln!("CVE-2024-6387 - regreSSHion race condition in OpenSSH server", "openssh-server", "CVE-2024-6387", &[VM, ASSET], 4,
        "A signal handler race condition in sshd allows unauthenticated remote code execution as root on glibc-based Linux."),
    vuln!("CVE-2023-38545 - SOCKS5 heap overflow in curl", "curl", "CVE-2023-38545", HOSTS, 4,
        "curl can overflow a heap buffer during the SOCKS5 proxy handshake when the host name is too long."),
    vuln!("CVE-2022-3602 - X.509 email address buffer overflow in OpenSSL", "openssl", "CVE-2022-3602", HOSTS, 3,
        "A buffer overrun can be triggered in X.509 certificate verification, specifically in name constraint checking."),
    vuln!("CVE-2023-45853 - Integer overflow in zlib MiniZip", "zlib", "CVE-2023-45853", HOSTS, 3,
        "MiniZip in zlib through 1.3 has an integer overflow and resultant heap-based buffer overflow in zipOpenNewFileInZip4_64."),
    vuln!("CVE-2024-21626 - Container breakout in runc (Leaky Vessels)", "runc", "CVE-2024-21626", &[VM, K8S], 4,
        "An internal file descriptor leak in runc allows a container process to gain access to the host filesystem."),
    vuln!("CVE-2022-25883 - ReDoS in semver", "semver", "CVE-2022-25883", &[REPO, IMAGE], 2,
        "Versions of semver before 7.5.2 are vulnerable to regular expression denial of service via the new Range function."),
    vuln!("CVE-2021-23337 - Command injection in lodash template", "lodash", "CVE-2021-23337", &[REPO, IMAGE, FUNCTION], 3,
        "Lodash versions prior to 4.17.21 are vulnerable to command injection via the template function."),
    vuln!("CVE-2023-32681 - Proxy-Authorization header leak in requests", "requests", "CVE-2023-32681", &[REPO, IMAGE, FUNCTION], 2,
        "Requests leaks Proxy-Authorization headers to destination servers when redirected to an HTTPS endpoint."),
    vuln!("CVE-2024-24790 - IPv4-mapped address handling in Go net/netip", "golang/stdlib", "CVE-2024-24790", &[IMAGE, REPO], 3,
        "The Is methods of netip.Addr do not behave as expected for IPv4-mapped IPv6 addresses."),
    conf!("S3 bucket allows public read access", MISCONFIG, &[BUCKET], 4,
        "The bucket policy or ACL grants read access to everyone, exposing its objects to the internet.",
        "Enable *Block Public Access* on the bucket and remove the public grants from its policy and ACLs."),
    conf!("Storage bucket is not encrypted with a customer-managed key", MISCONFIG, &[BUCKET], 2,
        "Objects are encrypted with a provider-managed key only, so key rotation and access cannot be audited.",
        "Configure default encryption with a customer-managed KMS key."),
    conf!("Database instance is publicly accessible", MISCONFIG, &[DATABASE], 4,
        "The database endpoint resolves to a public IP address and accepts connections from the internet.",
        "Disable public accessibility and reach the database through private networking only."),
    conf!("Database automated backups are disabled", MISCONFIG, &[DATABASE], 2,
        "Point-in-time recovery is impossible because automated backups are turned off.",
        "Enable automated backups with a retention period of at least 7 days."),
    conf!("IAM role has administrator access attached", MISCONFIG, &[IAM], 4,
        "The role carries a policy that allows `*` actions on `*` resources.",
        "Replace the administrator policy with a least-privilege policy for the role's workload."),
    conf!("IAM role unused for 90 days", MISCONFIG, &[IAM], 1,
        "The role has not been assumed for 90 days and widens the attack surface for no benefit.",
        "Delete the role, or document why it must be kept."),
    conf!("Security group allows SSH (22) from 0.0.0.0/0", MISCONFIG, &[VM], 3,
        "An inbound rule opens port 22 to the whole internet.",
        "Restrict the rule to the bastion or VPN address ranges, or use a session manager instead of SSH."),
    conf!("Instance metadata service v1 (IMDSv1) is enabled", MISCONFIG, &[VM], 2,
        "IMDSv1 answers unauthenticated requests, which SSRF bugs can abuse to steal instance credentials.",
        "Require IMDSv2 (session tokens) on the instance."),
    conf!("Kubernetes API server endpoint is publicly accessible", MISCONFIG, &[K8S], 3,
        "The cluster's control plane endpoint accepts connections from any address.",
        "Enable the private endpoint and restrict public access to known CIDR ranges."),
    conf!("Privileged container running in cluster", MISCONFIG, &[K8S], 4,
        "A pod runs a container with `privileged: true`, which grants it the host's capabilities.",
        "Remove the privileged flag and grant only the capabilities the container needs."),
    conf!("Function uses a deprecated runtime", MISCONFIG, &[FUNCTION], 2,
        "The function runs on a runtime that no longer receives security updates.",
        "Migrate the function to a supported runtime version."),
    conf!("Disk encryption is not enabled", MISCONFIG, &[VM], 2,
        "The instance's volumes are not encrypted at rest.",
        "Enable encryption by default and re-create the volumes from encrypted snapshots."),
    conf!("Hard-coded AWS access key in source code", SECRET, &[REPO, IMAGE], 5,
        "An AWS access key id and secret access key were found in a tracked file.",
        "Deactivate and rotate the key at once, remove it from the history, and load secrets from a vault."),
    conf!("Private key committed to repository", SECRET, &[REPO], 4,
        "A PEM-encoded private key is part of the repository contents.",
        "Revoke the key pair, purge it from the git history and store keys in a secrets manager."),
    conf!("SQL injection in query built from request parameters", CODE, &[REPO], 4,
        "User-controlled input flows into a SQL statement without parameterization.",
        "Use parameterized queries or the ORM's query builder for every statement."),
    conf!("Cross-site scripting (reflected) in template rendering", CODE, &[REPO], 3,
        "A request parameter is rendered into HTML without output encoding.",
        "Encode output for its HTML context and enable a strict Content-Security-Policy."),
    conf!("Insecure deserialization of untrusted data", CODE, &[REPO], 4,
        "Data from the network is deserialized with a format that can instantiate arbitrary types.",
        "Deserialize untrusted data only into plain data types, with an allow-list of classes."),
    conf!("Missing rate limiting on authentication endpoint", CODE, &[REPO], 2,
        "The login endpoint accepts unlimited attempts, enabling credential stuffing.",
        "Add per-account and per-IP rate limits with exponential backoff."),
    conf!("TLS certificate expires within 30 days", MISCONFIG, &[ASSET, VM], 2,
        "The certificate served on port 443 expires soon; clients will then refuse the connection.",
        "Renew the certificate and automate renewal (e.g. ACME)."),
    conf!("Outdated operating system version (end of life)", VULN, &[ASSET, VM], 3,
        "The operating system no longer receives security patches from its vendor.",
        "Upgrade the host to a supported operating system release."),
];

pub struct DatasourceDef {
    pub name: &'static str,
    pub source: &'static str,
    pub dtype: &'static str,
    pub providers: &'static [&'static str],
    pub kinds: &'static [u8],
    pub rtypes: &'static [u8],
    /// The source's own status strings for: open, in progress, fixed, ignored.
    pub statuses: [&'static str; 4],
}

const CLOUDS: &[&str] = &["AWS", "Azure", "GCP"];
const ALL_RT: &[u8] = &[VM, IMAGE, BUCKET, FUNCTION, DATABASE, IAM, K8S, REPO, ASSET];

pub static DATASOURCES: [DatasourceDef; 8] = [
    DatasourceDef {
        name: "AWS Security Hub - prod",
        source: "AWS Security Hub",
        dtype: "aws_security_hub",
        providers: &["AWS"],
        kinds: &[VULN, MISCONFIG],
        rtypes: ALL_RT,
        statuses: ["NEW", "NOTIFIED", "RESOLVED", "SUPPRESSED"],
    },
    DatasourceDef {
        name: "Wiz",
        source: "Wiz",
        dtype: "wiz",
        providers: CLOUDS,
        kinds: &[VULN, MISCONFIG, SECRET],
        rtypes: ALL_RT,
        statuses: ["OPEN", "IN_PROGRESS", "RESOLVED", "REJECTED"],
    },
    DatasourceDef {
        name: "Snyk - GitHub",
        source: "Snyk",
        dtype: "snyk",
        providers: &["GitHub", "AWS", "Azure", "GCP"],
        kinds: &[VULN, CODE],
        rtypes: &[REPO, IMAGE],
        statuses: ["open", "open", "fixed", "ignored"],
    },
    DatasourceDef {
        name: "Tenable.io",
        source: "Tenable",
        dtype: "tenable_io",
        providers: CLOUDS,
        kinds: &[VULN],
        rtypes: &[VM, ASSET],
        statuses: ["NEW", "ACTIVE", "FIXED", "ACCEPTED"],
    },
    DatasourceDef {
        name: "Prisma Cloud",
        source: "Prisma Cloud",
        dtype: "prisma_cloud",
        providers: CLOUDS,
        kinds: &[MISCONFIG],
        rtypes: ALL_RT,
        statuses: ["", "", "", ""],
    },
    DatasourceDef {
        name: "GitHub Advanced Security",
        source: "GitHub",
        dtype: "github_advanced_security",
        providers: &["GitHub"],
        kinds: &[SECRET, CODE, VULN],
        rtypes: &[REPO],
        statuses: ["open", "open", "fixed", "dismissed"],
    },
    DatasourceDef {
        name: "Microsoft Defender for Cloud",
        source: "Microsoft Defender for Cloud",
        dtype: "azure_defender",
        providers: &["Azure"],
        kinds: &[VULN, MISCONFIG],
        rtypes: ALL_RT,
        statuses: ["Unhealthy", "Unhealthy", "Healthy", "Exempted"],
    },
    DatasourceDef {
        name: "Orca Security",
        source: "Orca",
        dtype: "orca",
        providers: CLOUDS,
        kinds: &[VULN, MISCONFIG, SECRET],
        rtypes: ALL_RT,
        statuses: ["open", "in_progress", "closed", "dismissed"],
    },
];

pub struct StatusDef {
    pub key: &'static str,
    pub title: &'static str,
    pub category: &'static str,
    pub description: &'static str,
}

pub static STATUSES: [StatusDef; 7] = [
    StatusDef { key: "10", title: "New", category: "OPEN", description: "Reported and not yet triaged." },
    StatusDef {
        key: "11",
        title: "Open",
        category: "OPEN",
        description: "Triaged and awaiting remediation.",
    },
    StatusDef { key: "12", title: "In progress", category: "OPEN", description: "Remediation is under way." },
    StatusDef { key: "20", title: "Fixed", category: "FIXED", description: "Verified as fixed." },
    StatusDef {
        key: "21",
        title: "Resolved by source",
        category: "FIXED",
        description: "The source no longer reports it.",
    },
    StatusDef {
        key: "30",
        title: "Risk accepted",
        category: "IGNORED",
        description: "Accepted as a known risk.",
    },
    StatusDef { key: "31", title: "False positive", category: "IGNORED", description: "Not a real issue." },
];
const STATUS_WEIGHTS: &[u32] = &[15, 40, 15, 15, 5, 5, 5];

pub fn status_index(key: &str) -> Option<u8> {
    STATUSES.iter().position(|s| s.key == key).map(|i| i as u8)
}

pub fn status_open(idx: u8) -> bool {
    STATUSES.get(usize::from(idx)).is_some_and(|s| s.category == "OPEN")
}

pub const SUB_PHASES: &[&str] = &["NEW", "TRIAGE", "TICKET_OPENED", "IN_REMEDIATION", "VERIFYING", "CLOSED"];
pub const PHASE_CLOSED: u8 = 5;

pub const PEOPLE: &[&str] = &[
    "alice.cohen@acme.example",
    "bob.levi@acme.example",
    "carol.mizrahi@acme.example",
    "dan.katz@acme.example",
    "eve.friedman@acme.example",
    "frank.adler@acme.example",
];

pub const TICKET_STATUSES: &[&str] = &["BACKLOG", "IN_PROGRESS", "SCHEDULED", "DONE", "REJECTED"];

// ------------------------------------------------------------------ records

/// One finding: 32 bytes. Times are unix seconds; scores are hundredths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FindingRec {
    pub seed: u32,
    pub discovered: u32,
    pub last_reported: u32,
    /// SLA due time; 0 = none.
    pub due: u32,
    pub resource: u32,
    pub score: u16,
    /// `NO_SCORE` = none.
    pub original_score: u16,
    pub template: u8,
    pub severity: u8,
    pub datasource: u8,
    pub status: u8,
    pub sub_phase: u8,
    /// tickets (bits 0-1), comments (bits 2-4), attachments (bits 5-6).
    pub counts: u8,
    /// Bit 0: the due date was set by a user (SLA rules leave it alone).
    pub flags: u8,
    pub _pad: u8,
}

pub const NO_SCORE: u16 = u16::MAX;
pub const FLAG_USER_SLA: u8 = 1;
/// Bit 1: removed by a test hook (`remove_finding`): no query sees the finding any more.
pub const FLAG_REMOVED: u8 = 2;

impl FindingRec {
    pub fn removed(&self) -> bool {
        self.flags & FLAG_REMOVED != 0
    }
    pub fn tickets(&self) -> usize {
        usize::from(self.counts & 3)
    }
    pub fn comments(&self) -> usize {
        usize::from((self.counts >> 2) & 7)
    }
    pub fn attachments(&self) -> usize {
        usize::from((self.counts >> 5) & 3)
    }
    pub fn template(&self) -> &'static Template {
        TEMPLATES.get(usize::from(self.template)).unwrap_or(&TEMPLATES[0])
    }
    pub fn datasource(&self) -> &'static DatasourceDef {
        DATASOURCES.get(usize::from(self.datasource)).unwrap_or(&DATASOURCES[0])
    }
    pub fn status(&self) -> &'static StatusDef {
        STATUSES.get(usize::from(self.status)).unwrap_or(&STATUSES[0])
    }
}

#[derive(Clone, Copy, Debug)]
pub struct ResourceRec {
    pub seed: u32,
    pub findings: u32,
    pub first_seen: u32,
    pub last_seen: u32,
    pub account: u8,
    pub rtype: u8,
    pub region: u8,
    pub app: u8,
}

impl ResourceRec {
    pub fn account(&self) -> &'static Account {
        ACCOUNTS.get(usize::from(self.account)).unwrap_or(&ACCOUNTS[0])
    }
    pub fn rtype(&self) -> &'static str {
        RTYPES.get(usize::from(self.rtype)).copied().unwrap_or("ASSET")
    }
    pub fn region(&self) -> &'static str {
        let a = self.account();
        a.regions.get(usize::from(self.region)).copied().unwrap_or("global")
    }
    pub fn app(&self) -> &'static str {
        APPS.get(usize::from(self.app)).copied().unwrap_or("app")
    }
    pub fn team(&self) -> &'static str {
        TEAMS.get(usize::from(self.app) % TEAMS.len()).copied().unwrap_or("platform")
    }

    pub fn name(&self) -> String {
        let h = mix(u64::from(self.seed), 1);
        let app = self.app();
        let env = self.account().env;
        let n = h % 97;
        match (self.rtype, self.account().provider) {
            (VM, "AWS") => format!("i-0{:016x}", h & 0x0fff_ffff_ffff_ffff),
            (VM, "Azure") => format!("vm-{app}-{env}-{n:02}"),
            (VM, _) => format!("gce-{app}-{env}-{n:02}"),
            (IMAGE, _) => format!("acme/{app}-api:{}.{}.{}", h % 4 + 1, (h >> 8) % 20, (h >> 16) % 10),
            (BUCKET, _) => format!("acme-{app}-{env}-{:06x}", h & 0xff_ffff),
            (FUNCTION, _) => {
                format!("{app}-{}-handler", ["sync", "ingest", "notify", "export"][(h % 4) as usize])
            }
            (DATABASE, _) => format!("{app}-{env}-db-{n}"),
            (IAM, _) => {
                format!("{app}-{env}-{}-role", ["deployer", "reader", "worker", "admin"][(h % 4) as usize])
            }
            (K8S, _) => format!("{env}-k8s-{}-{n}", self.region()),
            (REPO, _) => format!("acme-corp/{app}-{}", ["service", "web", "infra", "lib"][(h % 4) as usize]),
            _ => format!("{app}-{env}-host-{:03}.acme.internal", h % 1000),
        }
    }

    pub fn resource_id(&self) -> String {
        let a = self.account();
        let name = self.name();
        match a.provider {
            "AWS" => {
                let (svc, kind) = match self.rtype {
                    VM => ("ec2", "instance/"),
                    IMAGE => ("ecr", "repository/"),
                    BUCKET => ("s3", ""),
                    FUNCTION => ("lambda", "function:"),
                    DATABASE => ("rds", "db:"),
                    IAM => ("iam", "role/"),
                    K8S => ("eks", "cluster/"),
                    _ => ("ec2", "host/"),
                };
                if self.rtype == BUCKET {
                    format!("arn:aws:s3:::{name}")
                } else {
                    format!("arn:aws:{svc}:{}:{}:{kind}{name}", self.region(), a.id)
                }
            }
            "Azure" => format!("/subscriptions/{}/resourceGroups/rg-{}/providers/{}", a.id, self.app(), name),
            "GCP" => format!("//cloudresourcemanager.googleapis.com/projects/{}/{}", a.id, name),
            _ => format!("https://github.com/{name}"),
        }
    }

    pub fn tags(&self) -> [(&'static str, &'static str); 3] {
        [("env", self.account().env), ("team", self.team()), ("app", self.app())]
    }
}

/// A stored `filters_config`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FiltersConfig {
    pub filtersjson: Option<String>,
    pub scopesjson: Option<String>,
    pub scopesid: Option<u64>,
    pub filtersid: Option<u64>,
    pub filters_fields_to_exclude: Vec<String>,
    pub filters_fields_to_include: Vec<String>,
    pub filters_fields_to_override: Vec<String>,
    pub scopes_fields_to_exclude: Vec<String>,
    pub scopes_fields_to_include: Vec<String>,
    pub scopes_fields_to_override: Vec<String>,
    pub scope_group: Option<u64>,
}

impl FiltersConfig {
    pub fn json(filter: &str) -> Self {
        Self { filtersjson: Some(filter.to_owned()), ..Default::default() }
    }
}

#[derive(Clone, Debug)]
pub struct FilterRec {
    pub pk: u64,
    pub name: String,
    pub description: Option<String>,
    pub scope: bool,
    pub filter: String,
    pub created_by: String,
    pub created: i64,
    pub updated: i64,
}

#[derive(Clone, Debug)]
pub struct ScopeGroupRec {
    pub pk: u64,
    pub name: String,
    pub description: Option<String>,
    pub scopes: Vec<u64>,
    pub users: Vec<String>,
    pub created: i64,
    pub updated: i64,
}

#[derive(Clone, Debug)]
pub struct ScoringRuleRec {
    pub pk: u64,
    pub name: String,
    pub description: Option<String>,
    pub fc: FiltersConfig,
    pub method: String,
    pub value: f64,
    pub round: Option<String>,
    pub priority: i64,
    pub active: bool,
    pub affected: i64,
    pub created_by: String,
    pub created: i64,
    pub updated: i64,
}

#[derive(Clone, Debug)]
pub struct StatusRuleRec {
    pub pk: u64,
    pub name: String,
    pub description: Option<String>,
    pub fc: FiltersConfig,
    pub status_key: String,
    pub enabled: bool,
    pub priority: i64,
    pub affected: i64,
    pub created_by: String,
    pub created: i64,
    pub updated: i64,
}

#[derive(Clone, Debug)]
pub struct SlaGroupRec {
    pub pk: u64,
    pub name: String,
    pub description: Option<String>,
    pub fc: FiltersConfig,
    pub priority: i64,
    pub created: i64,
}

#[derive(Clone, Debug)]
pub struct SlaRuleRec {
    pub pk: u64,
    pub name: String,
    pub group: u64,
    pub severity: i64,
    pub days: i64,
    pub at_risk_days: i64,
    pub fc: FiltersConfig,
    pub active: bool,
    pub affected: i64,
    pub created: i64,
    pub updated: i64,
}

#[derive(Clone, Debug)]
pub struct TicketSlaRec {
    pub pk: u64,
    pub name: String,
    pub description: Option<String>,
    pub fc: FiltersConfig,
    pub days: i64,
    pub provider: Option<String>,
    pub enabled: bool,
    pub priority: i64,
    pub created: i64,
    pub updated: i64,
}

#[derive(Clone, Debug)]
pub struct QueueRec {
    pub pk: u64,
    pub title: String,
    pub description: String,
    pub cron: String,
    pub state: &'static str,
    pub status: &'static str,
    pub priority: &'static str,
    pub endpoint: &'static str,
    pub provider: Option<&'static str>,
    pub max_tickets: i64,
    pub opened: i64,
    pub fc: FiltersConfig,
    pub created: i64,
    pub last_run: Option<i64>,
}

#[derive(Clone, Debug)]
pub struct CommentRec {
    pub pk: u64,
    pub text: Arc<str>,
    pub author: String,
    pub created: i64,
}

#[derive(Clone, Debug, Default)]
pub struct HierarchyNode {
    pub pk: u64,
    pub name: String,
    pub count: usize,
    pub children: Vec<HierarchyNode>,
}

#[derive(Clone, Debug, Default)]
pub struct Hierarchy {
    pub generated: i64,
    pub total: usize,
    pub groups: Vec<HierarchyNode>,
    pub unscoped: usize,
}

/// Data that never changes after seeding.
pub struct Statics {
    pub resources: Vec<ResourceRec>,
    /// Rank of each resource by name, built on first use (sorting by resource name).
    pub name_rank: OnceLock<Vec<u32>>,
}

/// One consistent version of the whole store. Cloning is cheap: the big parts are `Arc`s,
/// copied only when a mutation changes them while a reader still holds the old version.
#[derive(Clone)]
pub struct Data {
    pub version: u64,
    /// Which model of the service is served; the filter language depends on it.
    pub profile: super::known::Profile,
    /// The dataset's fixed "today" (00:00 UTC, unix seconds): ages and SLA states count from it.
    pub today: i64,
    pub findings: Arc<Vec<FindingRec>>,
    pub statics: Arc<Statics>,
    pub extra_comments: Arc<HashMap<u32, Vec<CommentRec>>>,
    pub next_comment_pk: u64,
    pub filters: Vec<FilterRec>,
    pub scope_groups: Vec<ScopeGroupRec>,
    pub scoring_rules: Vec<ScoringRuleRec>,
    pub status_rules: Vec<StatusRuleRec>,
    pub sla_groups: Vec<SlaGroupRec>,
    pub sla_rules: Vec<SlaRuleRec>,
    pub ticket_sla_rules: Vec<TicketSlaRec>,
    pub queues: Vec<QueueRec>,
    pub hierarchy: Option<Arc<Hierarchy>>,
    /// Next primary keys, per collection.
    pub next_pk: HashMap<&'static str, u64>,
}

impl Data {
    pub fn resource(&self, idx: u32) -> &ResourceRec {
        static FALLBACK: ResourceRec = ResourceRec {
            seed: 0,
            findings: 0,
            first_seen: 0,
            last_seen: 0,
            account: 0,
            rtype: 0,
            region: 0,
            app: 0,
        };
        self.statics.resources.get(idx as usize).unwrap_or(&FALLBACK)
    }

    pub fn finding(&self, idx: usize) -> Option<&FindingRec> {
        self.findings.get(idx)
    }

    pub fn alloc_pk(&mut self, collection: &'static str) -> u64 {
        let next = self.next_pk.entry(collection).or_insert(1);
        let pk = *next;
        *next += 1;
        pk
    }

    pub fn resource_name_rank(&self) -> &Vec<u32> {
        self.statics.name_rank.get_or_init(|| {
            let res = &self.statics.resources;
            let mut order: Vec<(String, u32)> =
                res.iter().enumerate().map(|(i, r)| (r.name(), i as u32)).collect();
            order.sort_unstable();
            let mut rank = vec![0u32; res.len()];
            for (pos, (_, i)) in order.iter().enumerate() {
                if let Some(slot) = rank.get_mut(*i as usize) {
                    *slot = pos as u32;
                }
            }
            rank
        })
    }
}

/// The store: readers take an `Arc` snapshot, writers swap in a changed copy.
pub struct Store {
    inner: RwLock<Arc<Data>>,
}

impl Store {
    pub fn new(data: Data) -> Self {
        Self { inner: RwLock::new(Arc::new(data)) }
    }

    pub fn snapshot(&self) -> Arc<Data> {
        match self.inner.read() {
            Ok(g) => Arc::clone(&g),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Runs a mutation on the store; the version changes only when it succeeds.
    pub fn write<T>(&self, f: impl FnOnce(&mut Data) -> Result<T, String>) -> Result<T, String> {
        let mut guard = match self.inner.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut draft: Data = (**guard).clone();
        let out = f(&mut draft)?;
        draft.version += 1;
        *guard = Arc::new(draft);
        Ok(out)
    }
}

// ------------------------------------------------------------------ seeding

/// Days to remediate by severity (index = severity) in the seeded "Default" SLA group.
pub const DEFAULT_SLA_DAYS: [i64; 6] = [0, 180, 90, 60, 30, 7];
/// The seeded "Production critical" SLA group's days for severities 4 and 5.
pub const PROD_SLA_DAYS: [i64; 2] = [14, 3];

/// Days to remediate a finding of `severity` on an account of environment `env` under the seeded
/// SLA groups.
pub fn sla_days(env: &str, severity: u8) -> i64 {
    if env == "prod" && severity >= 4 {
        PROD_SLA_DAYS.get(usize::from(severity - 4)).copied().unwrap_or(30)
    } else {
        DEFAULT_SLA_DAYS.get(usize::from(severity)).copied().unwrap_or(90)
    }
}

fn score_for(rng: &mut Rng, severity: u8) -> u16 {
    let (lo, hi) = match severity {
        5 => (900, 1000),
        4 => (700, 899),
        3 => (400, 699),
        2 => (200, 399),
        _ => (10, 199),
    };
    (lo + rng.below(hi - lo + 1)) as u16
}

pub fn seed(findings: usize, seed: u64) -> Result<Data, String> {
    if findings > u32::MAX as usize / 8 {
        return Err(format!("too many findings: {findings}"));
    }
    let mut rng = Rng::new(seed);
    let today_days = days_from_civil(2025, 6, 1) + (seed % 128) as i64;
    let today = today_days * DAY;

    // Resources: about four findings each, skewed so that some resources have many.
    let n_res = (findings / 4).max(8);
    let github = ACCOUNTS.iter().position(|a| a.provider == "GitHub").unwrap_or(0);
    let mut resources = Vec::with_capacity(n_res);
    for _ in 0..n_res {
        let account = rng.weighted(ACCOUNT_WEIGHTS);
        let rtype = if account == github { REPO } else { rng.weighted(CLOUD_RTYPE_WEIGHTS) as u8 };
        let regions = ACCOUNTS.get(account).map_or(1, |a| a.regions.len());
        resources.push(ResourceRec {
            seed: rng.next_u32(),
            findings: 0,
            first_seen: u32::MAX,
            last_seen: 0,
            account: account as u8,
            rtype,
            region: rng.below(regions as u64) as u8,
            app: rng.below(APPS.len() as u64) as u8,
        });
    }

    let by_rtype: Vec<Vec<u8>> = (0..RTYPES.len() as u8)
        .map(|rt| {
            TEMPLATES
                .iter()
                .enumerate()
                .filter(|(_, t)| t.rtypes.contains(&rt))
                .map(|(i, _)| i as u8)
                .collect()
        })
        .collect();
    // Datasources able to report each (template, account) pair.
    let ds_for: Vec<Vec<Vec<u8>>> = TEMPLATES
        .iter()
        .map(|t| {
            ACCOUNTS
                .iter()
                .map(|a| {
                    DATASOURCES
                        .iter()
                        .enumerate()
                        .filter(|(_, d)| {
                            d.providers.contains(&a.provider)
                                && d.kinds.contains(&t.kind)
                                && t.rtypes.iter().any(|rt| d.rtypes.contains(rt))
                        })
                        .map(|(i, _)| i as u8)
                        .collect()
                })
                .collect()
        })
        .collect();

    let mut recs = Vec::with_capacity(findings);
    for _ in 0..findings {
        let u = rng.unit();
        let res_idx = ((u * u * n_res as f64) as usize).min(n_res - 1);
        let res = resources.get(res_idx).copied().ok_or("resource index out of range")?;
        let cands = by_rtype.get(usize::from(res.rtype)).filter(|c| !c.is_empty());
        let template = cands.and_then(|c| c.get(rng.below(c.len() as u64) as usize)).copied().unwrap_or(0);
        let t = TEMPLATES.get(usize::from(template)).ok_or("template index out of range")?;
        let ds = ds_for
            .get(usize::from(template))
            .and_then(|row| row.get(usize::from(res.account)))
            .filter(|c| !c.is_empty())
            .and_then(|c| c.get(rng.below(c.len() as u64) as usize))
            .copied()
            .unwrap_or(1);
        let severity = match rng.weighted(&[15, 70, 15]) {
            0 => t.severity.saturating_sub(1).max(1),
            2 => (t.severity + 1).min(5),
            _ => t.severity,
        };
        let score = score_for(&mut rng, severity);
        let original_score =
            if t.kind == VULN && rng.chance(0.8) { score_for(&mut rng, severity) } else { NO_SCORE };
        let age_u = rng.unit();
        let age_days = (age_u * age_u * 720.0) as i64;
        let discovered = today - age_days * DAY - rng.below(DAY as u64) as i64;
        let status = rng.weighted(STATUS_WEIGHTS) as u8;
        let open = status_open(status);
        let last_reported = if open {
            (today - rng.below(3 * DAY as u64) as i64).max(discovered)
        } else {
            discovered + rng.below((today - discovered).max(1) as u64) as i64
        };
        let sub_phase = if open {
            [0u8, 1, 2, 3, 4].get(rng.weighted(&[20, 30, 25, 20, 5])).copied().unwrap_or(1)
        } else {
            PHASE_CLOSED
        };
        let tickets: u8 = match sub_phase {
            2..=4 => 1 + u8::from(rng.chance(0.2)),
            PHASE_CLOSED => u8::from(rng.chance(0.3)),
            _ => 0,
        };
        let comments = rng.weighted(&[50, 25, 15, 10]) as u8;
        let attachments = rng.weighted(&[80, 15, 5]) as u8;
        let acct = res.account();
        let days = sla_days(acct.env, severity);
        let due = discovered + days * DAY;
        if let Some(r) = resources.get_mut(res_idx) {
            r.findings += 1;
            r.first_seen = r.first_seen.min(discovered as u32);
            r.last_seen = r.last_seen.max(last_reported as u32);
        }
        recs.push(FindingRec {
            seed: rng.next_u32(),
            discovered: discovered as u32,
            last_reported: last_reported as u32,
            due: due as u32,
            resource: res_idx as u32,
            score,
            original_score,
            template,
            severity,
            datasource: ds,
            status,
            sub_phase,
            counts: tickets | (comments << 2) | (attachments << 5),
            flags: 0,
            _pad: 0,
        });
    }
    for r in &mut resources {
        if r.findings == 0 {
            let h = mix(u64::from(r.seed), 2);
            r.first_seen = (today - (h % 400) as i64 * DAY) as u32;
            r.last_seen = (today - (h % 3) as i64 * DAY) as u32;
        }
    }

    let n = findings as u64;
    let mut data = Data {
        version: 1,
        profile: super::known::Profile::Default,
        today,
        findings: Arc::new(recs),
        statics: Arc::new(Statics { resources, name_rank: OnceLock::new() }),
        extra_comments: Arc::new(HashMap::new()),
        next_comment_pk: (n + 2) * 8,
        filters: Vec::new(),
        scope_groups: Vec::new(),
        scoring_rules: Vec::new(),
        status_rules: Vec::new(),
        sla_groups: Vec::new(),
        sla_rules: Vec::new(),
        ticket_sla_rules: Vec::new(),
        queues: Vec::new(),
        hierarchy: None,
        next_pk: HashMap::new(),
    };
    seed_rules(&mut data);
    Ok(data)
}

/// title, cron, state, priority, endpoint, provider, filter JSON.
type QueueSeed = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static str,
);

fn seed_rules(d: &mut Data) {
    let today = d.today;
    let ago = |days: i64| today - days * DAY - 9 * 3600;
    let admin = "admin@acme.example".to_string();
    let filters: &[(&str, bool, &str)] = &[
        (
            "Critical and high open findings",
            false,
            r#"{"operator":"and","operands":[{"field":"severity","condition":"in","value":["4","5"]},{"field":"actual_status","condition":"","value":{"field":"category","condition":"in","value":["OPEN"]}}]}"#,
        ),
        ("Publicly exposed", false, r#"{"field":"title","condition":"contains","value":"public"}"#),
        ("Log4Shell", false, r#"{"field":"cve","condition":"in","value":["CVE-2021-44228"]}"#),
        (
            "AWS production",
            false,
            r#"{"operator":"and","operands":[{"field":"cloud_provider","condition":"in","value":["AWS"]},{"field":"tags_values","condition":"overlap","value":["prod"]}]}"#,
        ),
        ("AWS", true, r#"{"field":"cloud_provider","condition":"in","value":["AWS"]}"#),
        ("Azure", true, r#"{"field":"cloud_provider","condition":"in","value":["Azure"]}"#),
        ("GCP", true, r#"{"field":"cloud_provider","condition":"in","value":["GCP"]}"#),
        (
            "Code repositories",
            true,
            r#"{"field":"resource_type","condition":"in","value":["CODE_REPOSITORY"]}"#,
        ),
        ("Production", true, r#"{"field":"tags_values","condition":"overlap","value":["prod"]}"#),
    ];
    for (i, (name, scope, filter)) in filters.iter().enumerate() {
        let pk = d.alloc_pk("filter");
        d.filters.push(FilterRec {
            pk,
            name: (*name).into(),
            description: None,
            scope: *scope,
            filter: (*filter).into(),
            created_by: admin.clone(),
            created: ago(200 - i as i64 * 10),
            updated: ago(100 - i as i64 * 5),
        });
    }
    for (name, scopes) in [("Cloud teams", vec![5, 6, 7]), ("AppSec", vec![8]), ("Production", vec![9])] {
        let pk = d.alloc_pk("scope_group");
        d.scope_groups.push(ScopeGroupRec {
            pk,
            name: name.into(),
            description: Some(format!("Findings visible to the {name} group")),
            scopes,
            users: PEOPLE.iter().take(2 + pk as usize).map(|p| (*p).to_string()).collect(),
            created: ago(150),
            updated: ago(30),
        });
    }
    let scoring: &[(&str, &str, &str, f64, bool)] = &[
        (
            "Boost publicly exposed resources",
            r#"{"field":"title","condition":"contains","value":"public"}"#,
            "INCREASE",
            1.0,
            true,
        ),
        (
            "Lower dev environments",
            r#"{"field":"tags_values","condition":"overlap","value":["dev"]}"#,
            "DECREASE",
            0.5,
            false,
        ),
        (
            "Known exploited: Log4Shell",
            r#"{"field":"cve","condition":"in","value":["CVE-2021-44228"]}"#,
            "SET",
            10.0,
            true,
        ),
    ];
    for (i, (name, f, method, value, active)) in scoring.iter().enumerate() {
        let pk = d.alloc_pk("scoring_rule");
        d.scoring_rules.push(ScoringRuleRec {
            pk,
            name: (*name).into(),
            description: None,
            fc: FiltersConfig::json(f),
            method: (*method).into(),
            value: *value,
            round: Some("ROUND".into()),
            priority: i as i64 + 1,
            active: *active,
            affected: 0,
            created_by: admin.clone(),
            created: ago(120 - i as i64),
            updated: ago(60 - i as i64),
        });
    }
    let status_rules: &[(&str, &str, &str, bool)] = &[
        (
            "Accept unused IAM roles in dev",
            r#"{"operator":"and","operands":[{"field":"resource_type","condition":"in","value":["IAM_ROLE"]},{"field":"tags_values","condition":"overlap","value":["dev"]}]}"#,
            "30",
            false,
        ),
        ("Triage new criticals", r#"{"field":"severity","condition":"in","value":["5"]}"#, "11", true),
    ];
    for (i, (name, f, key, enabled)) in status_rules.iter().enumerate() {
        let pk = d.alloc_pk("status_rule");
        d.status_rules.push(StatusRuleRec {
            pk,
            name: (*name).into(),
            description: None,
            fc: FiltersConfig::json(f),
            status_key: (*key).into(),
            enabled: *enabled,
            priority: i as i64 + 1,
            affected: 0,
            created_by: admin.clone(),
            created: ago(90),
            updated: ago(45),
        });
    }
    let default_pk = d.alloc_pk("sla_group");
    d.sla_groups.push(SlaGroupRec {
        pk: default_pk,
        name: "Default".into(),
        description: Some("All findings".into()),
        fc: FiltersConfig::default(),
        priority: 100,
        created: ago(365),
    });
    let prod_pk = d.alloc_pk("sla_group");
    d.sla_groups.push(SlaGroupRec {
        pk: prod_pk,
        name: "Production critical".into(),
        description: Some("Production resources".into()),
        fc: FiltersConfig::json(r#"{"field":"tags_values","condition":"overlap","value":["prod"]}"#),
        priority: 1,
        created: ago(300),
    });
    for sev in (1..=5).rev() {
        let pk = d.alloc_pk("sla_rule");
        let days = DEFAULT_SLA_DAYS.get(sev as usize).copied().unwrap_or(90);
        d.sla_rules.push(SlaRuleRec {
            pk,
            name: format!("Default severity {sev}"),
            group: default_pk,
            severity: sev,
            days,
            at_risk_days: (days / 4).max(1),
            fc: FiltersConfig::default(),
            active: true,
            affected: 0,
            created: ago(365),
            updated: ago(200),
        });
    }
    for (sev, days) in [(5, PROD_SLA_DAYS[1]), (4, PROD_SLA_DAYS[0])] {
        let pk = d.alloc_pk("sla_rule");
        d.sla_rules.push(SlaRuleRec {
            pk,
            name: format!("Production severity {sev}"),
            group: prod_pk,
            severity: sev,
            days,
            at_risk_days: 1,
            fc: FiltersConfig::default(),
            active: true,
            affected: 0,
            created: ago(300),
            updated: ago(100),
        });
    }
    for (i, (name, days, provider)) in
        [("Jira critical tickets", 7, "JIRA"), ("ServiceNow default", 30, "SERVICENOW")].iter().enumerate()
    {
        let pk = d.alloc_pk("ticket_sla_rule");
        d.ticket_sla_rules.push(TicketSlaRec {
            pk,
            name: (*name).into(),
            description: None,
            fc: FiltersConfig::json(r#"{"field":"severity","condition":"in","value":["4","5"]}"#),
            days: *days,
            provider: Some((*provider).into()),
            enabled: true,
            priority: i as i64 + 1,
            created: ago(80),
            updated: ago(20),
        });
    }
    let queues: &[QueueSeed] = &[
        (
            "Critical vulnerabilities to Jira",
            "0 21 * * *",
            "ENABLED",
            "HIGH",
            "TICKET",
            Some("JIRA"),
            r#"{"operator":"and","operands":[{"field":"severity","condition":"in","value":["5"]},{"field":"finding_type","condition":"in","value":["VULNERABILITY"]}]}"#,
        ),
        (
            "Public buckets to ServiceNow",
            "0 6 * * 1",
            "ENABLED",
            "CRITICAL",
            "TICKET",
            Some("SERVICENOW"),
            r#"{"field":"title","condition":"contains","value":"public"}"#,
        ),
        (
            "Weekly digest to Slack",
            "0 8 * * 1",
            "ENABLED",
            "LOW",
            "MESSAGE",
            None,
            r#"{"field":"severity","condition":"in","value":["3","4","5"]}"#,
        ),
        (
            "Leaked secrets webhook",
            "*/30 * * * *",
            "DISABLED",
            "MEDIUM",
            "WEBHOOK",
            None,
            r#"{"field":"finding_type","condition":"in","value":["SECRET"]}"#,
        ),
    ];
    for (i, (title, cron, state, prio, endpoint, provider, f)) in queues.iter().enumerate() {
        let pk = d.alloc_pk("queue");
        let enabled = *state == "ENABLED";
        d.queues.push(QueueRec {
            pk,
            title: (*title).into(),
            description: format!("{title} (seeded)"),
            cron: (*cron).into(),
            state,
            status: if enabled { ["SUCCEEDED", "IDLE", "FAILED"][i % 3] } else { "IDLE" },
            priority: prio,
            endpoint,
            provider: *provider,
            max_tickets: [50, 20, 0, 10][i % 4],
            opened: [12, 3, 0, 0][i % 4],
            fc: FiltersConfig::json(f),
            created: ago(100 + i as i64 * 7),
            last_run: enabled.then(|| today - (i as i64 + 1) * 3600),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeding_is_deterministic_and_compact() {
        assert_eq!(std::mem::size_of::<FindingRec>(), 32);
        let a = seed(2000, 42).unwrap();
        let b = seed(2000, 42).unwrap();
        assert_eq!(a.findings, b.findings);
        assert_eq!(a.today, b.today);
        let c = seed(2000, 43).unwrap();
        assert_ne!(a.findings, c.findings);
        let names_a: Vec<String> = a.statics.resources.iter().take(50).map(ResourceRec::name).collect();
        let names_b: Vec<String> = b.statics.resources.iter().take(50).map(ResourceRec::name).collect();
        assert_eq!(names_a, names_b);
    }

    #[test]
    fn seeded_values_are_plausible() {
        let d = seed(5000, 7).unwrap();
        assert_eq!(d.findings.len(), 5000);
        for f in d.findings.iter() {
            assert!((1..=5).contains(&f.severity));
            assert!(f.score <= 1000);
            assert!(i64::from(f.discovered) <= d.today);
            assert!(f.last_reported >= f.discovered);
            let t = f.template();
            let r = d.resource(f.resource);
            assert!(t.rtypes.contains(&r.rtype), "{} on {}", t.title, r.rtype());
        }
        let providers: std::collections::HashSet<&str> =
            d.findings.iter().map(|f| d.resource(f.resource).account().provider).collect();
        assert!(providers.len() >= 4);
        assert!(d.findings.iter().any(|f| f.tickets() > 0));
        assert!(!d.scoring_rules.is_empty() && !d.filters.is_empty() && !d.queues.is_empty());
    }
}
