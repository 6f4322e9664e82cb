//! The CDI resource's validating webhook, as upstream's `cdi-validate`: a `CDI` whose
//! `spec.uninstallStrategy` is `BlockUninstallIfWorkloadsExist` cannot be deleted while any
//! DataVolume (but those a DataImportCron keeps) exists, since deleting it takes CDI's CRDs and with
//! them every DataVolume. Pure: the DataVolumes are counted by the caller.

use serde_json::Value;

/// The webhook's path (upstream's).
pub const PATH: &str = "/cdi-validate";
/// The label of the DataVolumes a DataImportCron keeps, which do not block the uninstall.
pub const DATA_IMPORT_CRON_LABEL: &str = "cdi.kubevirt.io/dataImportCron";
/// The strategy that blocks the uninstall.
pub const BLOCK: &str = "BlockUninstallIfWorkloadsExist";

/// What a review asks of the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UninstallCheck {
    /// Nothing to check: admitted.
    Admit,
    /// The deletion of a CDI that blocks its uninstall: admitted when no DataVolume exists.
    CountDataVolumes,
    /// Refused as it is, for this reason.
    Refuse(String),
}

/// The request's uid and what it asks for.
///
/// # Errors
/// A review without a request or a uid (answered with a Bad Request).
pub fn read(review: &Value) -> Result<(String, UninstallCheck), String> {
    let request = review.get("request").ok_or("the AdmissionReview has no request")?;
    let uid = request["uid"]
        .as_str()
        .ok_or("the AdmissionReview's request has no uid")?
        .to_owned();
    let resource = &request["resource"];
    if resource["group"] != "cdi.kubevirt.io" || resource["resource"] != "cdis" {
        let message = format!(
            "unexpected resource: {}",
            resource["resource"].as_str().unwrap_or_default()
        );
        return Ok((uid, UninstallCheck::Refuse(message)));
    }
    if request["operation"] != "DELETE" {
        return Ok((uid, UninstallCheck::Admit));
    }
    let Some(cdi) = request.get("oldObject").filter(|o| o.is_object()) else {
        return Ok((uid, UninstallCheck::Refuse("cannot derive deleted resource".to_owned())));
    };
    // A CDI that never deployed, or failed to, holds nothing back.
    if matches!(
        cdi.pointer("/status/phase").and_then(Value::as_str),
        None | Some("" | "Error")
    ) {
        return Ok((uid, UninstallCheck::Admit));
    }
    let check = if cdi.pointer("/spec/uninstallStrategy").and_then(Value::as_str) == Some(BLOCK) {
        UninstallCheck::CountDataVolumes
    } else {
        UninstallCheck::Admit
    };
    Ok((uid, check))
}

/// The answer once the DataVolumes are counted (at most two are listed, as upstream lists them).
///
/// # Errors
/// Upstream's refusal naming how many DataVolumes are left.
pub fn decide(data_volumes: usize) -> Result<(), String> {
    if data_volumes == 0 {
        return Ok(());
    }
    Err(format!(
        "rejecting the uninstall request, since there are still {data_volumes} DataVolumes present. Either delete all DataVolumes or change the uninstall strategy before uninstalling CDI"
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn review(operation: &str, resource: &str, old: Option<Value>) -> Value {
        let mut request = json!({
            "uid": "u1", "operation": operation,
            "resource": {"group": "cdi.kubevirt.io", "version": "v1beta1", "resource": resource},
        });
        if let Some(old) = old {
            request["oldObject"] = old;
        }
        json!({"request": request})
    }

    fn cdi(strategy: Option<&str>, phase: Option<&str>) -> Value {
        let mut cdi = json!({"metadata": {"name": "cdi"}, "spec": {}});
        if let Some(strategy) = strategy {
            cdi["spec"]["uninstallStrategy"] = json!(strategy);
        }
        if let Some(phase) = phase {
            cdi["status"] = json!({"phase": phase});
        }
        cdi
    }

    #[test]
    fn only_deleting_a_deployed_cdi_that_blocks_its_uninstall_counts_data_volumes() {
        let cases = [
            (
                review("DELETE", "cdis", Some(cdi(Some(BLOCK), Some("Deployed")))),
                UninstallCheck::CountDataVolumes,
            ),
            (
                review("DELETE", "cdis", Some(cdi(Some(BLOCK), Some("Deleting")))),
                UninstallCheck::CountDataVolumes,
            ),
            (
                review("DELETE", "cdis", Some(cdi(Some("RemoveWorkloads"), Some("Deployed")))),
                UninstallCheck::Admit,
            ),
            (
                review("DELETE", "cdis", Some(cdi(None, Some("Deployed")))),
                UninstallCheck::Admit,
            ),
            (
                review("DELETE", "cdis", Some(cdi(Some(BLOCK), Some("Error")))),
                UninstallCheck::Admit,
            ),
            (
                review("DELETE", "cdis", Some(cdi(Some(BLOCK), None))),
                UninstallCheck::Admit,
            ),
            (
                review("UPDATE", "cdis", Some(cdi(Some(BLOCK), Some("Deployed")))),
                UninstallCheck::Admit,
            ),
            (
                review("DELETE", "cdis", None),
                UninstallCheck::Refuse("cannot derive deleted resource".to_owned()),
            ),
            (
                review("DELETE", "datavolumes", Some(cdi(Some(BLOCK), Some("Deployed")))),
                UninstallCheck::Refuse("unexpected resource: datavolumes".to_owned()),
            ),
        ];
        for (review, expected) in cases {
            assert_eq!(read(&review), Ok(("u1".to_owned(), expected.clone())), "{review}");
        }
        assert!(read(&json!({})).is_err());
    }

    #[test]
    fn data_volumes_left_refuse_the_uninstall_with_upstreams_message() {
        assert_eq!(decide(0), Ok(()));
        assert_eq!(
            decide(2),
            Err("rejecting the uninstall request, since there are still 2 DataVolumes present. Either delete all DataVolumes or change the uninstall strategy before uninstalling CDI".to_owned())
        );
    }
}
