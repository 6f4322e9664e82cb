use pretty_assertions::assert_eq;

use super::*;

fn archive(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    build(&mut builder);
    builder.into_inner().expect("tar")
}

fn file(builder: &mut tar::Builder<Vec<u8>>, path: &str, data: &[u8], format: &str) {
    let mut header = match format {
        "gnu" => tar::Header::new_gnu(),
        "ustar" => tar::Header::new_ustar(),
        _ => tar::Header::new_old(),
    };
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    builder.append_data(&mut header, path, data).expect("append");
}

fn entries(bytes: Vec<u8>) -> Vec<(String, EntryKind, u64)> {
    let mut stream = TarStream::new(Box::new(io::Cursor::new(bytes)));
    let mut seen = Vec::new();
    while let Some(entry) = stream.next_entry().expect("entry") {
        seen.push((entry.path, entry.kind, entry.size));
    }
    seen
}

#[test]
fn every_header_form_gives_its_path_kind_and_size() {
    let long = format!("disk/{}.qcow2", "n".repeat(150));
    for format in ["gnu", "ustar", "old"] {
        let bytes = archive(|b| {
            let mut dir = tar::Header::new_gnu();
            dir.set_entry_type(tar::EntryType::Directory);
            dir.set_size(0);
            dir.set_mode(0o755);
            b.append_data(&mut dir, "disk/", io::empty()).expect("dir");
            file(b, "disk/a.img", &[7; 1000], format);
            file(b, "boot/empty", &[], format);
            if format != "old" {
                file(b, &long, &[1; 3], format);
            }
            let mut link = tar::Header::new_gnu();
            link.set_entry_type(tar::EntryType::Symlink);
            b.append_link(&mut link, "disk/link", "a.img").expect("link");
        });
        let mut want = vec![
            ("disk/".to_owned(), EntryKind::Directory, 0),
            ("disk/a.img".to_owned(), EntryKind::File, 1000),
            ("boot/empty".to_owned(), EntryKind::File, 0),
        ];
        if format != "old" {
            want.push((long.clone(), EntryKind::File, 3));
        }
        want.push(("disk/link".to_owned(), EntryKind::Other, 0));
        assert_eq!(entries(bytes), want, "{format}");
    }
}

#[test]
fn pax_records_name_the_entry() {
    let mut bytes = Vec::new();
    let records = b"28 path=disk/from-pax.qcow2\n";
    let mut pax = tar::Header::new_ustar();
    pax.set_entry_type(tar::EntryType::XHeader);
    pax.set_size(records.len() as u64);
    pax.set_path("PaxHeaders/x").expect("path");
    pax.set_cksum();
    bytes.extend_from_slice(pax.as_bytes());
    bytes.extend_from_slice(records);
    bytes.resize(bytes.len().next_multiple_of(BLOCK), 0);
    bytes.extend(archive(|b| file(b, "short", b"data", "ustar")));
    assert_eq!(entries(bytes), [("disk/from-pax.qcow2".to_owned(), EntryKind::File, 4)]);
}

#[test]
fn the_entry_wanted_is_read_in_place_and_the_others_skipped() {
    let data: Vec<u8> = (0..5000_u32).map(|n| (n % 251) as u8).collect();
    let bytes = archive(|b| {
        file(b, "etc/other", &[9; 700], "gnu");
        file(b, "disk/disk.img", &data, "gnu");
        file(b, "after", &[1; 10], "gnu");
    });
    let mut stream = TarStream::new(Box::new(io::Cursor::new(bytes)));
    let first = stream.next_entry().expect("first").expect("an entry");
    assert_eq!(first.path, "etc/other");
    let second = stream.next_entry().expect("second").expect("an entry");
    assert_eq!(second.path, "disk/disk.img");
    let mut read = Vec::new();
    stream.into_entry().read_to_end(&mut read).expect("read");
    assert_eq!(read, data);
}

/// A header block of `kind` for `name` and `size`, its checksum set (the tar crate's).
fn header(name: &str, kind: u8, size: u64, format: &str) -> Vec<u8> {
    let mut header = match format {
        "ustar" => tar::Header::new_ustar(),
        "gnu" => tar::Header::new_gnu(),
        _ => tar::Header::new_old(),
    };
    header.set_size(size);
    header.set_entry_type(tar::EntryType::new(kind));
    header.set_mode(0o644);
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    // The tar crate writes a NUL type as `0`; old archives have the NUL itself.
    header.as_old_mut().linkflag[0] = kind;
    header.set_cksum();
    header.as_bytes().to_vec()
}

#[test]
fn a_ustar_prefix_names_the_entry() {
    let mut header = tar::Header::new_ustar();
    header.set_size(3);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(0o644);
    let long_dir = format!("disk/{}", "d".repeat(120));
    header
        .set_path(format!("{long_dir}/x.img"))
        .expect("a path the prefix holds");
    header.set_cksum();
    assert!(
        header.as_ustar().is_some_and(|u| !u.prefix.iter().all(|&b| b == 0)),
        "the prefix is used"
    );
    let mut bytes = header.as_bytes().to_vec();
    bytes.extend_from_slice(b"abc");
    bytes.resize(BLOCK * 2, 0);
    assert_eq!(entries(bytes), [(format!("{long_dir}/x.img"), EntryKind::File, 3)]);
}

#[test]
fn sizes_from_pax_and_base_256_are_read_and_huge_ones_refused() {
    let records = b"12 size=700\n";
    let mut bytes = header("PaxHeaders/x", b'x', records.len() as u64, "ustar");
    bytes.extend_from_slice(records);
    bytes.resize(bytes.len().next_multiple_of(BLOCK), 0);
    bytes.extend(header("big.img", b'0', 0, "ustar"));
    bytes.extend(vec![5_u8; 1024]);
    bytes.extend(header("after", b'0', 0, "ustar"));
    assert_eq!(
        entries(bytes),
        [
            ("big.img".to_owned(), EntryKind::File, 700),
            ("after".to_owned(), EntryKind::File, 0)
        ]
    );

    let mut base256 = header("disk/b.img", b'0', 0, "gnu");
    base256[124..136].copy_from_slice(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x00]);
    let fix = tar::Header::from_byte_slice(&base256).clone();
    let mut fixed = fix;
    fixed.set_cksum();
    let mut bytes = fixed.as_bytes().to_vec();
    bytes.extend(vec![1_u8; 512]);
    assert_eq!(entries(bytes), [("disk/b.img".to_owned(), EntryKind::File, 512)]);

    let mut huge = header("disk/h.img", b'0', 0, "gnu");
    huge[124..136].copy_from_slice(&[0xff; 12]);
    let mut huge_header = tar::Header::from_byte_slice(&huge).clone();
    huge_header.set_cksum();
    let mut stream = TarStream::new(Box::new(io::Cursor::new(huge_header.as_bytes().to_vec())));
    assert!(matches!(stream.next_entry(), Err(TarError::Invalid(_))));
}

#[test]
fn old_directories_links_and_unknown_types_keep_the_reader_in_place() {
    let mut bytes = header("disk/", 0, 0, "old");
    bytes.extend(header("disk/link", b'2', 999, "gnu"));
    bytes.extend(header("disk/odd", b'Z', 600, "gnu"));
    bytes.extend(vec![9_u8; 1024]);
    bytes.extend(header("disk/d.img", b'0', 4, "gnu"));
    bytes.extend(b"data");
    bytes.resize(bytes.len().next_multiple_of(BLOCK), 0);
    assert_eq!(
        entries(bytes),
        [
            ("disk/".to_owned(), EntryKind::Directory, 0),
            ("disk/link".to_owned(), EntryKind::Other, 0),
            ("disk/odd".to_owned(), EntryKind::Other, 600),
            ("disk/d.img".to_owned(), EntryKind::File, 4),
        ]
    );
}

#[test]
fn an_entry_cut_short_is_an_error_not_a_short_disk() {
    let mut bytes = header("disk/d.img", b'0', 4096, "gnu");
    bytes.extend(vec![3_u8; 1000]);
    let mut stream = TarStream::new(Box::new(io::Cursor::new(bytes)));
    assert!(stream.next_entry().expect("header").is_some());
    let mut read = Vec::new();
    let error = stream.into_entry().read_to_end(&mut read).expect_err("cut short");
    assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
}

#[test]
fn what_is_not_a_tar_archive_is_refused() {
    let mut garbage = vec![0x55_u8; 2048];
    garbage[0] = b'x';
    assert!(matches!(
        TarStream::new(Box::new(io::Cursor::new(garbage))).next_entry(),
        Err(TarError::Invalid(_))
    ));
    let mut cut = archive(|b| file(b, "disk/a", &[1; 4096], "gnu"));
    cut.truncate(BLOCK + 100);
    let mut stream = TarStream::new(Box::new(io::Cursor::new(cut)));
    assert!(stream.next_entry().expect("header").is_some());
    assert!(matches!(stream.next_entry(), Err(TarError::Read(_))));
    assert_eq!(entries(Vec::new()), []);
}
