//! The budget's unit tests: the pure rule, and the file under real locks.

use super::*;
use crate::core::budget_rule::{slack, FORMAT};

fn state(sends: &[f64]) -> State {
    State { v: FORMAT, sends: sends.to_vec(), blocked_until: 0.0, keep: 0.0, written: 0.0 }
}

#[test]
fn a_slot_is_free_until_the_window_holds_the_limit() {
    assert_eq!(slot(&state(&[]), 100.0, Some((2, 10.0))), 100.0);
    assert_eq!(slot(&state(&[95.0]), 100.0, Some((2, 10.0))), 100.0);
    // Two sends in the window: the next goes when the older is 10 s old.
    assert_eq!(slot(&state(&[95.0, 99.0]), 100.0, Some((2, 10.0))), 105.0 + slack(10.0));
    // Bookings ahead count too (another process booked a slot in the future).
    assert_eq!(slot(&state(&[95.0, 99.0, 105.0]), 100.0, Some((2, 10.0))), 109.0 + slack(10.0));
    assert_eq!(slot(&state(&[95.0, 99.0]), 100.0, None), 100.0);
}

#[test]
fn a_servers_wait_comes_first() {
    let mut s = state(&[]);
    s.blocked_until = 160.0;
    assert_eq!(slot(&s, 100.0, Some((5, 10.0))), 160.0);
    assert_eq!(slot(&s, 100.0, None), 160.0);
}

#[test]
fn over_any_window_no_more_than_the_limit_across_writers() {
    // Three "processes" booking in turn into one shared log.
    let mut s = state(&[]);
    let mut sends = Vec::new();
    for i in 0..300 {
        let now = f64::from(i) * 0.01;
        s.sanitize(now, 10.0);
        let at = slot(&s, now, Some((20, 10.0)));
        s.sends.push(at);
        sends.push(at);
    }
    sends.sort_by(f64::total_cmp);
    for (i, t) in sends.iter().enumerate() {
        let within = sends[i..].iter().filter(|u| **u - t < 10.0).count();
        assert!(within <= 20, "{within} sends within 10 s from send {i}");
    }
}

#[test]
fn hostile_state_is_sanitized() {
    let mut s = State {
        v: 9,
        sends: vec![f64::NAN, f64::INFINITY, -1.0, 1e300, 99.5, 50.0, 98.0],
        blocked_until: 1e300,
        keep: f64::NAN,
        written: f64::NAN,
    };
    s.sanitize(100.0, 10.0);
    assert_eq!(s.sends, vec![98.0, 99.5]);
    assert_eq!(s.blocked_until, 0.0);
    let mut s = state(&vec![99.0; MAX_SENDS + 10]);
    s.sanitize(100.0, 10.0);
    assert_eq!(s.sends.len(), MAX_SENDS);
}

#[test]
fn key_is_a_hash_not_the_token() {
    let k = key("https://api.example/v1", b"secret-token");
    assert_eq!(k.len(), 32);
    assert!(!k.contains("secret"));
    assert_ne!(k, key("https://other.example/v1", b"secret-token"));
    assert_ne!(k, key("https://api.example/v1", b"other-token"));
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sf-budget-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

#[tokio::test]
async fn books_through_the_file_and_refuses_a_long_wait() {
    let dir = tempdir("book");
    let minute = Some((2, Duration::from_secs(60)));
    let b = Budget::new(Some(dir.clone()), "k".into(), minute, Duration::from_secs(5));
    assert_eq!(b.reserve().await, Booking::Booked(Duration::ZERO));
    assert_eq!(b.reserve().await, Booking::Booked(Duration::ZERO));
    // The third would wait about a minute: longer than max_wait.
    assert!(matches!(b.reserve().await, Booking::TooLong(w) if w > 55.0));
    // A second client of the same token sees the same log.
    let other = Budget::new(Some(dir.clone()), "k".into(), minute, Duration::from_secs(5));
    assert_eq!(other.view().used, 2);
    assert_eq!(other.view().remaining, Some(0));
    // A client with a shorter window books without dropping what the longer one counts.
    let quick =
        Budget::new(Some(dir.clone()), "k".into(), Some((100, Duration::from_secs(1))), Duration::ZERO);
    assert_eq!(quick.reserve().await, Booking::Booked(Duration::ZERO));
    assert!(matches!(b.reserve().await, Booking::TooLong(_)), "the minute's sends were kept");
    assert_eq!(b.view().used, 3);
    // A corrupt file reads as empty.
    fs::write(dir.join("k.json"), b"{not json").unwrap();
    assert_eq!(other.reserve().await, Booking::Booked(Duration::ZERO));
    // A server's wait reaches clients without a limit, capped at MAX_BLOCK.
    let plain = Budget::new(Some(dir.clone()), "k".into(), None, Duration::from_secs(5));
    b.blocked_for(Duration::from_secs(3600)).await;
    assert!(matches!(plain.reserve().await, Booking::TooLong(w) if w > 3500.0));
    b.blocked_for(Duration::from_secs(1_000_000)).await;
    assert!(matches!(plain.reserve().await, Booking::TooLong(w) if w <= MAX_BLOCK));
    // A limit too large to share still honours the server's wait, unbooked.
    let huge = Budget::new(
        Some(dir.clone()),
        "k".into(),
        Some((30_000, Duration::from_secs(60))),
        Duration::from_secs(5),
    );
    assert!(matches!(huge.reserve().await, Booking::TooLong(_)));
    assert_eq!(huge.view().limit, Some((30_000, 60.0)));
    let _ = fs::remove_dir_all(&dir);
}

// The paused clock moves only while every task waits, so the two-second patience costs no
// real time and the figures below are exact.
#[tokio::test(start_paused = true)]
async fn a_held_lock_costs_one_wait_then_the_file_is_left_alone() {
    let dir = tempdir("held");
    let minute = Some((10, Duration::from_secs(60)));
    let b = Budget::new(Some(dir.clone()), "k".into(), minute, Duration::from_secs(5));
    assert_eq!(b.reserve().await, Booking::Booked(Duration::ZERO));
    let holder = File::open(dir.join("k.lock")).unwrap();
    holder.lock().unwrap();
    let started = tokio::time::Instant::now();
    assert_eq!(b.reserve().await, Booking::Unbooked(Duration::ZERO));
    assert!(started.elapsed() >= LOCK_PATIENCE);
    // Within the cooldown the next request does not wait for the lock again.
    let again = tokio::time::Instant::now();
    assert_eq!(b.reserve().await, Booking::Unbooked(Duration::ZERO));
    assert_eq!(again.elapsed(), Duration::ZERO);
    holder.unlock().unwrap();
    let _ = fs::remove_dir_all(&dir);
}

fn private_dir(name: &str) -> PathBuf {
    let dir = tempdir(name);
    check_dir(&dir, true).unwrap();
    dir
}

#[cfg(unix)]
#[tokio::test]
async fn a_fifo_or_a_link_as_the_state_file_is_discarded_not_waited_on() {
    let dir = private_dir("fifo");
    let minute = Some((10, Duration::from_secs(60)));
    let b = Budget::new(Some(dir.clone()), "k".into(), minute, Duration::from_secs(5));
    let state = dir.join("k.json");
    let made = std::process::Command::new("mkfifo").arg(&state).status().unwrap();
    assert!(made.success());
    // Without O_NONBLOCK the open of a FIFO waits for a writer forever.
    let booked = tokio::time::timeout(Duration::from_secs(30), b.reserve()).await;
    assert_eq!(booked.unwrap(), Booking::Booked(Duration::ZERO));
    assert!(fs::symlink_metadata(&state).unwrap().is_file(), "the FIFO was replaced");
    let plain = Budget::new(Some(dir.clone()), "k".into(), None, Duration::from_secs(5));
    fs::remove_file(&state).unwrap();
    std::process::Command::new("mkfifo").arg(&state).status().unwrap();
    assert_eq!(plain.view().used, 0);
    // A FIFO in place of the lock file is replaced too (the budget is shared again).
    let lock = dir.join("k.lock");
    let _ = fs::remove_file(&lock);
    std::process::Command::new("mkfifo").arg(&lock).status().unwrap();
    let before = b.view().used;
    assert!(matches!(b.reserve().await, Booking::Booked(_)));
    assert!(fs::symlink_metadata(&lock).unwrap().is_file());
    assert_eq!(b.view().used, before + 1, "the booking was shared through the file");
    // A link to a file elsewhere is neither followed nor written through.
    let elsewhere = tempdir("elsewhere-target");
    fs::write(&elsewhere, br#"{"v":1,"sends":[],"blocked_until":1e12}"#).unwrap();
    let _ = fs::remove_file(&state);
    std::os::unix::fs::symlink(&elsewhere, &state).unwrap();
    assert_eq!(b.reserve().await, Booking::Booked(Duration::ZERO));
    assert!(fs::symlink_metadata(&state).unwrap().is_file());
    assert_eq!(fs::read(&elsewhere).unwrap(), br#"{"v":1,"sends":[],"blocked_until":1e12}"#);
    let _ = fs::remove_file(&elsewhere);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_writer_whose_clock_was_ahead_is_moved_back() {
    let mut s = state(&[3700.0, 3700.5]);
    s.written = 3700.0;
    s.blocked_until = 3730.0;
    s.sanitize(100.0, 60.0);
    assert_eq!(s.sends, vec![100.0, 100.5]);
    assert_eq!(s.blocked_until, 130.0);
    // A writer a little ahead (within the margin) is left as it was.
    let mut s = state(&[103.0]);
    s.written = 103.0;
    s.sanitize(100.0, 60.0);
    assert_eq!(s.sends, vec![103.0]);
}

#[tokio::test]
async fn bookings_from_a_clock_ahead_do_not_block_the_others() {
    let dir = private_dir("ahead");
    let now = unix_now();
    let ahead = State {
        v: FORMAT,
        sends: vec![now + 3600.0; 2],
        blocked_until: 0.0,
        keep: 1.0,
        written: now + 3600.0,
    };
    fs::write(dir.join("k.json"), serde_json::to_vec(&ahead).unwrap()).unwrap();
    let b =
        Budget::new(Some(dir.clone()), "k".into(), Some((2, Duration::from_secs(1))), Duration::from_secs(5));
    match b.reserve().await {
        Booking::Booked(w) => assert!(w <= Duration::from_secs(2), "{w:?}"),
        other => panic!("held by a clock an hour ahead: {other:?}"),
    }
    let _ = fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_server_wait_is_kept_to_the_client_when_not_shared() {
    let dir = private_dir("noshare");
    let b = Budget::new(Some(dir.clone()), "k".into(), None, Duration::from_secs(5)).sharing_waits(false);
    b.blocked_for(Duration::from_secs(3600)).await;
    let other = Budget::new(Some(dir.clone()), "k".into(), None, Duration::from_secs(5));
    assert_eq!(other.reserve().await, Booking::Unbooked(Duration::ZERO));
    assert!(!dir.join("k.json").exists());
    let _ = fs::remove_dir_all(&dir);
}

#[cfg(unix)]
#[tokio::test]
async fn a_folder_inside_one_others_can_change_is_not_used() {
    use std::os::unix::fs::PermissionsExt as _;
    let parent = tempdir("parent");
    fs::create_dir_all(&parent).unwrap();
    fs::set_permissions(&parent, fs::Permissions::from_mode(0o777)).unwrap();
    let dir = parent.join("budget");
    let b = Budget::new(Some(dir.clone()), "k".into(), Some((1, Duration::from_secs(60))), Duration::ZERO);
    assert_eq!(b.reserve().await, Booking::Unbooked(Duration::ZERO));
    assert!(!dir.join("k.json").exists());
    // A sticky world-writable parent (as /tmp is) is fine: others cannot swap our folder.
    fs::set_permissions(&parent, fs::Permissions::from_mode(0o1777)).unwrap();
    assert_eq!(b.reserve().await, Booking::Booked(Duration::ZERO));
    let _ = fs::remove_dir_all(&parent);
}

#[tokio::test]
async fn refuses_a_folder_others_can_write_or_a_symlink() {
    let dir = tempdir("open");
    fs::create_dir_all(&dir).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let b =
            Budget::new(Some(dir.clone()), "k".into(), Some((1, Duration::from_secs(60))), Duration::ZERO);
        assert_eq!(b.reserve().await, Booking::Unbooked(Duration::ZERO), "the folder is not private");
        assert!(!dir.join("k.json").exists());
        assert_eq!(b.view().path, None);
        let real = tempdir("real");
        fs::create_dir_all(&real).unwrap();
        let link = tempdir("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let b =
            Budget::new(Some(link.clone()), "k".into(), Some((1, Duration::from_secs(60))), Duration::ZERO);
        assert_eq!(b.reserve().await, Booking::Unbooked(Duration::ZERO), "a symlinked folder is not used");
        assert!(!real.join("k.json").exists());
        assert_eq!(b.view().path, None);
        let _ = fs::remove_file(&link);
        let _ = fs::remove_dir_all(&real);
    }
    let _ = fs::remove_dir_all(&dir);
}
