//! What starts a replay job, as its request says it: the same selection a
//! replay takes (a group, messages or a search) and the job's plan beside
//! it, in one JSON object. The handler reads it, and the audit records it
//! as it was sent.

use rabbit_backoff_core::{PlanError, ReplayPlan, parse_rate, parse_threshold};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::write_request::WriteBody;
use crate::selection::Selection;

/// The body of a replay job's start: a selection and a plan, side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct JobRequest {
    /// What to replay.
    #[serde(flatten)]
    pub(crate) selection: Selection,
    /// How.
    #[serde(flatten)]
    pub(crate) plan: PlanRequest,
}

/// A replay job's plan as its request says it, every value as an operator
/// writes it on the command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanRequest {
    /// How many messages go first.
    pub(crate) canary: u32,
    /// The share of failures above which the job stops: `10%` or `0.1`.
    pub(crate) stop_above: String,
    /// How many of the latest fates the waves are judged on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) window: Option<u32>,
    /// At most this many messages a second: `50/s` or `50`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rate: Option<String>,
    /// How long the canary waits for its fates: `120s`, `5m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fate_timeout: Option<String>,
}

/// The fields of [`PlanRequest`], told apart from the selection's.
const PLAN_FIELDS: [&str; 5] = ["canary", "stop_above", "window", "rate", "fate_timeout"];

impl<'de> Deserialize<'de> for JobRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut selection = Map::<String, Value>::deserialize(deserializer)?;
        let mut plan = Map::new();
        for field in PLAN_FIELDS {
            if let Some(value) = selection.remove(field) {
                plan.insert(field.to_owned(), value);
            }
        }
        Ok(JobRequest {
            selection: Selection::deserialize(Value::Object(selection))
                .map_err(D::Error::custom)?,
            plan: PlanRequest::deserialize(Value::Object(plan)).map_err(D::Error::custom)?,
        })
    }
}

impl WriteBody for JobRequest {
    const EXPECTED: &'static str = r#"a selection ({"group": "<id>"}, {"message_ids": ["<id>", …]} or {"matching": {…}}) with "canary": 20, "stop_above": "10%" and optionally "window": 50, "rate": "50/s", "fate_timeout": "120s""#;
}

impl PlanRequest {
    /// The plan and the rate (messages a second), or why they make no sense.
    pub(crate) fn plan(&self) -> Result<(ReplayPlan, Option<f64>), String> {
        let text = |e: PlanError| e.to_string();
        let mut plan = ReplayPlan::new(
            self.canary,
            parse_threshold(&self.stop_above).map_err(text)?,
        )
        .map_err(text)?;
        if let Some(window) = self.window {
            plan = plan.window(window).map_err(text)?;
        }
        if let Some(timeout) = &self.fate_timeout {
            let timeout = humantime::parse_duration(timeout.trim()).map_err(|e| {
                format!("'{timeout}' is no fate timeout ({e}): write a duration such as 120s or 5m")
            })?;
            plan = plan.fate_timeout(timeout);
        }
        let rate = self
            .rate
            .as_deref()
            .map(|rate| parse_rate(rate.trim().trim_end_matches("/s")).map_err(text))
            .transpose()?;
        Ok((plan, rate))
    }

    /// The plan in words: `a canary of 20, stopped above 10% failures, at
    /// most 50 messages a second`.
    pub(crate) fn describe(&self) -> String {
        let mut text = format!(
            "a canary of {}, stopped above {} failures",
            self.canary,
            self.stop_above.trim()
        );
        if let Some(window) = self.window {
            text.push_str(&format!(", waves judged on the latest {window} fates"));
        }
        if let Some(rate) = &self.rate {
            let rate = rate.trim().trim_end_matches("/s");
            text.push_str(&format!(", at most {rate} messages a second"));
        }
        if let Some(timeout) = &self.fate_timeout {
            text.push_str(&format!(", fates awaited {}", timeout.trim()));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_selection_and_a_plan_side_by_side() {
        let json = r#"{"group":"0123456789ab","canary":5,"stop_above":"10%","rate":"5/s","fate_timeout":"1s"}"#;
        let request: JobRequest = serde_json::from_str(json).unwrap();
        assert_eq!(request.selection, Selection::Group("0123456789ab".into()));
        let (plan, rate) = request.plan.plan().unwrap();
        assert_eq!(
            (plan.canary, plan.stop_above, plan.fate_timeout_ms),
            (5, 0.1, 1000)
        );
        assert_eq!(rate, Some(5.0));
        assert_eq!(
            serde_json::to_string(&request).unwrap(),
            json,
            "written as sent"
        );
        assert_eq!(
            request.plan.describe(),
            "a canary of 5, stopped above 10% failures, at most 5 messages a second, fates awaited 1s"
        );
        let search: JobRequest =
            serde_json::from_str(r#"{"matching":{"text":"x"},"canary":1,"stop_above":"0.5"}"#)
                .unwrap();
        assert!(matches!(search.selection, Selection::Matching(_)));
    }

    #[test]
    fn refuses_what_is_not_a_selection_and_a_plan() {
        for json in [
            r#"{"canary":5,"stop_above":"10%"}"#,
            r#"{"group":"g","stop_above":"10%"}"#,
            r#"{"group":"g","canary":5,"stop_above":"10%","canry":1}"#,
            r#"{"group":"g","message_id":"m","canary":5,"stop_above":"10%"}"#,
            r#"{"group":"g","canary":-1,"stop_above":"10%"}"#,
        ] {
            assert!(serde_json::from_str::<JobRequest>(json).is_err(), "{json}");
        }
    }

    #[test]
    fn a_plan_that_makes_no_sense_says_why() {
        let plan =
            |canary, stop_above: &str, rate: Option<&str>, timeout: Option<&str>| PlanRequest {
                canary,
                stop_above: stop_above.into(),
                window: None,
                rate: rate.map(Into::into),
                fate_timeout: timeout.map(Into::into),
            };
        let refused = |p: PlanRequest| p.plan().unwrap_err();
        assert!(refused(plan(5, "150%", None, None)).contains("is no threshold"));
        assert!(refused(plan(0, "10%", None, None)).contains("a canary of 0 messages"));
        assert!(refused(plan(5, "10%", Some("fast"), None)).contains("is no rate"));
        assert!(refused(plan(5, "10%", None, Some("soon"))).contains("is no fate timeout"));
        assert_eq!(
            plan(5, "10%", Some("50"), None).plan().unwrap().1,
            Some(50.0)
        );
    }
}
