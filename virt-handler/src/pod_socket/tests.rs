use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};

use super::PodSocket;

#[tokio::test]
async fn a_socket_is_bound_below_its_root_connected_to_and_removed() {
    let root = tempfile::tempdir().expect("tempdir");
    let socket = PodSocket::new(root.path(), "public/migrationproxy/vmi-source.sock");
    let listener = socket.bind_fresh(None).expect("bind");
    let made = std::fs::symlink_metadata(socket.path()).expect("the socket");
    assert!(made.file_type().is_socket());
    assert_eq!(made.permissions().mode() & 0o777, 0o600);
    let accepted = tokio::spawn(async move { listener.accept().await.map(drop) });
    socket.connect().await.expect("connect");
    accepted.await.expect("task").expect("accept");
    // A stale socket is replaced.
    let again = socket.bind_fresh(None).expect("bind again");
    drop(again);
    socket.remove().expect("remove");
    assert!(!socket.path().exists());
}

#[tokio::test]
async fn no_link_below_the_root_is_followed() {
    let root = tempfile::tempdir().expect("tempdir");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    // A directory of the pod swapped for a link to a directory of the node.
    std::fs::create_dir(root.path().join("public")).expect("public");
    std::os::unix::fs::symlink(elsewhere.path(), root.path().join("public/migrationproxy")).expect("link");
    let through_link = PodSocket::new(root.path(), "public/migrationproxy/vmi-source.sock");
    assert!(through_link.bind_fresh(None).is_err());
    assert_eq!(
        std::fs::read_dir(elsewhere.path()).expect("dir").count(),
        0,
        "nothing made there"
    );
    assert!(through_link.connect().await.is_err());
    assert!(through_link.remove().is_err());

    // The socket swapped for a link to another socket of the node.
    let node_socket = PodSocket::new(elsewhere.path(), "node.sock");
    let _listener = node_socket.bind_fresh(None).expect("the node's socket");
    std::fs::create_dir(root.path().join("private")).expect("private");
    std::os::unix::fs::symlink(node_socket.path(), root.path().join("private/libvirt-sock")).expect("link");
    let linked = PodSocket::new(root.path(), "private/libvirt-sock");
    assert!(linked.connect().await.is_err(), "the node's socket is not reached");
    // Binding there removes the link, not what it points at.
    let bound = linked.bind_fresh(None).expect("bind over the link");
    drop(bound);
    assert!(node_socket.path().exists());

    // An absolute link, and `..`, lead nowhere either.
    std::os::unix::fs::symlink("/", root.path().join("up")).expect("link");
    assert!(PodSocket::new(root.path(), "up/tmp/x.sock").bind_fresh(None).is_err());
    assert!(PodSocket::new(root.path(), "../x.sock").bind_fresh(None).is_err());
}

#[tokio::test]
#[cfg_attr(
    not(feature = "host-tests"),
    ignore = "needs root: make test runs it (feature host-tests)"
)]
async fn only_a_socket_is_connected_to_and_the_owner_is_set_without_following_links() {
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::write(root.path().join("plain"), b"x").expect("file");
    let error = PodSocket::new(root.path(), "plain")
        .connect()
        .await
        .expect_err("a file");
    assert!(error.to_string().contains("not a socket"), "{error}");
    let owned = PodSocket::new(root.path(), "owned/s.sock");
    drop(owned.bind_fresh(Some(107)).expect("bind"));
    let meta = std::fs::symlink_metadata(owned.path()).expect("socket");
    assert_eq!((meta.uid(), meta.gid()), (107, 107));
}
