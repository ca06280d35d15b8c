//! State that moves when an operator's parallelism changes: [`Keyed`] maps, and the two kinds
//! of operator list, [`ListState`] and [`UnionState`].
//!
//! The host can split and merge a snapshot only when it is in the rescalable layout of
//! `docs/ABI.md` §16 (`weir_abi::rescalable`): items the host moves by their key's key group,
//! split as a list, or hands to every subtask. This module writes that layout without the
//! operator's help. An operator keeps its per-key state in a [`Keyed`] map (a `HashMap` keyed
//! by the record key) and derives serde as before; while the SDK takes a snapshot, each
//! `Keyed`, `ListState` and `UnionState` field writes its entries as items of its own and
//! stands in the operator's bincode as a number, and the rest of the operator (its
//! configuration, say) becomes one union item. A restore reverses it: each field takes its
//! items back, whatever subtasks they came from. An operator with none of these fields
//! snapshots as plain bincode, as it always did: state the host cannot split.
//!
//! Outside a snapshot (in tests, or bincode of the operator's own) the three types serialize
//! as the map or sequence they hold, so a `Keyed<V>` reads what a `HashMap<Vec<u8>, V>` wrote:
//! a snapshot written before an operator moved to them restores into it.
//!
//! On a rescale every new subtask receives the union items of every old one. The rest of the
//! operator must therefore be the same in all of them: a restore that finds two different ones
//! fails, naming the fix (keep what differs per subtask in a [`ListState`]).

use core::cell::RefCell;
use core::fmt;
use core::hash::BuildHasherDefault;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use std::collections::{BTreeMap, HashMap};

use rustc_hash::FxHasher;
use serde::de::{DeserializeOwned, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use weir_abi::rescalable::{Item, ItemKind, MAGIC, RescalableState, Writer};

use crate::{Error, Result};

/// The state id of the operator's fields outside the three types: item 0 of the union.
const REST: u32 = 0;

/// How keyed maps hash their keys: Fx, deterministic and cheap in wasm.
pub type KeyHasher = BuildHasherDefault<FxHasher>;

/// Per-key state that follows its key when the operator's parallelism changes: a `HashMap`
/// from record key to `V` (it derefs to one), split by key group on a rescale.
///
/// The key must be the key of the records the state is about, the one the job's `key-hash`
/// edge routes by: after a rescale, the entry is with the subtask those records go to.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use weir_sdk::Keyed;
///
/// #[derive(Default, Serialize, Deserialize)]
/// struct Totals {
///     by_key: Keyed<u64>,
/// }
///
/// let mut totals = Totals::default();
/// *totals.by_key.entry(b"river".to_vec()).or_default() += 3;
/// assert_eq!(totals.by_key.get(&b"river"[..]), Some(&3));
/// ```
pub struct Keyed<V>(HashMap<Vec<u8>, V, KeyHasher>);

impl<V> Default for Keyed<V> {
    fn default() -> Self {
        Keyed(HashMap::default())
    }
}

impl<V: fmt::Debug> fmt::Debug for Keyed<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<V: PartialEq> PartialEq for Keyed<V> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<V: Eq> Eq for Keyed<V> {}

impl<V: Clone> Clone for Keyed<V> {
    fn clone(&self) -> Self {
        Keyed(self.0.clone())
    }
}

impl<V> Deref for Keyed<V> {
    type Target = HashMap<Vec<u8>, V, KeyHasher>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<V> DerefMut for Keyed<V> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl<V: Serialize> Serialize for Keyed<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> core::result::Result<S::Ok, S::Error> {
        serialize_keyed(serializer, self.0.len(), self.0.iter())
    }
}

impl<'de, V: DeserializeOwned> Deserialize<'de> for Keyed<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> core::result::Result<Self, D::Error> {
        let map = deserialize_keyed(
            deserializer,
            |len| HashMap::with_capacity_and_hasher(len, KeyHasher::default()),
            |map: &mut HashMap<_, _, _>, key: &[u8], value| {
                map.insert(key.to_vec(), value);
            },
        )?;
        Ok(Keyed(map))
    }
}

/// Serializes keyed state held in a container of the operator's own (as [`Keyed`] does): in a
/// snapshot, every `(key, value)` of `entries` becomes a keyed item and the container a state
/// id; elsewhere, a map of `len` entries.
pub fn serialize_keyed<'a, S, K, V>(
    serializer: S,
    len: usize,
    entries: impl Iterator<Item = (K, &'a V)>,
) -> core::result::Result<S::Ok, S::Error>
where
    S: Serializer,
    K: AsRef<[u8]>,
    V: Serialize + 'a,
{
    let mut entries = entries;
    let written = with_snapshot(|snapshot| -> core::result::Result<u32, S::Error> {
        let id = snapshot.next_id();
        for (key, value) in entries.by_ref() {
            snapshot.encode(value).map_err(serde::ser::Error::custom)?;
            snapshot.writer.keyed(id, key.as_ref(), &snapshot.scratch);
        }
        Ok(id)
    });
    match written {
        Some(id) => serializer.serialize_u32(id?),
        None => {
            let mut map = serializer.serialize_map(Some(len))?;
            for (key, value) in entries {
                map.serialize_entry(&Bytes(key.as_ref()), value)?;
            }
            map.end()
        }
    }
}

/// Deserializes keyed state into a container of the operator's own (as [`Keyed`] does): the
/// container is made by `with_capacity` for the number of entries (so it need not grow while
/// a million keys go in), and `insert` puts every entry in it, from the snapshot's keyed items
/// or from a map written by [`serialize_keyed`] outside a snapshot.
pub fn deserialize_keyed<'de, D, C, V>(
    deserializer: D,
    with_capacity: impl FnOnce(usize) -> C,
    mut insert: impl FnMut(&mut C, &[u8], V),
) -> core::result::Result<C, D::Error>
where
    D: Deserializer<'de>,
    V: DeserializeOwned,
{
    if restoring() {
        let id = u32::deserialize(deserializer)?;
        let read = with_restore(|restore| -> Result<C> {
            let mut container = with_capacity(restore.count(ItemKind::Keyed, id));
            for item in restore.take(ItemKind::Keyed, id) {
                insert(&mut container, item.key, decode(item.value)?);
            }
            Ok(container)
        })
        .expect("restoring, so a restore is in progress");
        return read.map_err(|e| serde::de::Error::custom(e.message()));
    }
    deserializer.deserialize_map(MapVisitor {
        with_capacity,
        insert,
        _value: PhantomData,
    })
}

/// Operator state kept as a list whose items are split among the subtasks when the parallelism
/// changes (Flink's list state): each new subtask gets a contiguous share of the items of all
/// the old ones, so nothing is lost or repeated. Derefs to a `Vec<T>`.
///
/// Good for what is per subtask and can be divided: counters that are summed, the offsets of
/// partitions a subtask read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListState<T>(pub Vec<T>);

/// Operator state kept as a list that every subtask receives whole after a rescale, merged
/// from all the old subtasks' (Flink's union list state). Derefs to a `Vec<T>`.
///
/// Good for what each subtask must see all of, and then filters: for example every old
/// subtask's watermark or its view of a shared resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnionState<T>(pub Vec<T>);

macro_rules! list_type {
    ($name:ident, $kind:expr) => {
        impl<T> Default for $name<T> {
            fn default() -> Self {
                $name(Vec::new())
            }
        }

        impl<T> Deref for $name<T> {
            type Target = Vec<T>;
            fn deref(&self) -> &Vec<T> {
                &self.0
            }
        }

        impl<T> DerefMut for $name<T> {
            fn deref_mut(&mut self) -> &mut Vec<T> {
                &mut self.0
            }
        }

        impl<T: Serialize> Serialize for $name<T> {
            fn serialize<S: Serializer>(
                &self,
                serializer: S,
            ) -> core::result::Result<S::Ok, S::Error> {
                serialize_items(serializer, $kind, &self.0)
            }
        }

        impl<'de, T: DeserializeOwned> Deserialize<'de> for $name<T> {
            fn deserialize<D: Deserializer<'de>>(
                deserializer: D,
            ) -> core::result::Result<Self, D::Error> {
                deserialize_items(deserializer, $kind).map($name)
            }
        }
    };
}

list_type!(ListState, ItemKind::List);
list_type!(UnionState, ItemKind::Union);

/// Serializes list items: in a snapshot as items of `kind` and a state id, elsewhere as a
/// sequence.
pub(crate) fn serialize_items<S: Serializer, T: Serialize>(
    serializer: S,
    kind: ItemKind,
    items: &[T],
) -> core::result::Result<S::Ok, S::Error> {
    let written = with_snapshot(|snapshot| -> core::result::Result<u32, S::Error> {
        let id = snapshot.next_id();
        for item in items {
            snapshot.encode(item).map_err(serde::ser::Error::custom)?;
            match kind {
                ItemKind::List => snapshot.writer.list(id, &snapshot.scratch),
                _ => snapshot.writer.union(id, &snapshot.scratch),
            }
        }
        Ok(id)
    });
    match written {
        Some(id) => serializer.serialize_u32(id?),
        None => {
            let mut seq = serializer.serialize_seq(Some(items.len()))?;
            for item in items {
                seq.serialize_element(item)?;
            }
            seq.end()
        }
    }
}

/// Deserializes list items written by [`serialize_items`].
pub(crate) fn deserialize_items<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    deserializer: D,
    kind: ItemKind,
) -> core::result::Result<Vec<T>, D::Error> {
    if !restoring() {
        return Vec::<T>::deserialize(deserializer);
    }
    let id = u32::deserialize(deserializer)?;
    let read = with_restore(|restore| {
        restore
            .take(kind, id)
            .map(|item| decode(item.value))
            .collect::<Result<Vec<T>>>()
    });
    read.unwrap_or(Ok(Vec::new()))
        .map_err(|e| serde::de::Error::custom(e.message()))
}

/// A snapshot being written: the items so far and the next state id.
struct Snapshot {
    writer: Writer,
    next: u32,
    /// Where each value is encoded before it becomes an item, reused.
    scratch: Vec<u8>,
}

impl Snapshot {
    fn next_id(&mut self) -> u32 {
        self.next += 1;
        self.next
    }

    /// Encodes `value` into `scratch`, with no snapshot in progress: a `Keyed` inside a value
    /// is part of that value, written as a map.
    fn encode<V: Serialize + ?Sized>(&mut self, value: &V) -> Result<()> {
        self.scratch.clear();
        encode_into(value, &mut self.scratch)
    }
}

/// A rescalable snapshot being restored: its bytes (verified whole), and the kinds and state
/// ids of the items no field has taken yet, with how many there are. Each field reads its own
/// items straight from the bytes: no index of a million items is built.
struct Restore {
    bytes: Vec<u8>,
    untaken: BTreeMap<(ItemKind, u32), usize>,
}

impl Restore {
    /// How many items of `kind` and state `id` there are, if not taken yet.
    fn count(&self, kind: ItemKind, id: u32) -> usize {
        self.untaken.get(&(kind, id)).copied().unwrap_or(0)
    }

    /// The items of `kind` and state `id`, marked taken.
    fn take(&mut self, kind: ItemKind, id: u32) -> impl Iterator<Item = Item<'_>> {
        self.untaken.remove(&(kind, id));
        RescalableState::decode(&self.bytes)
            .ok()
            .flatten()
            .into_iter()
            .flat_map(|layout| layout.items())
            .filter(move |item| (item.kind, item.state) == (kind, id))
    }
}

std::thread_local! {
    static SNAPSHOT: RefCell<Option<Snapshot>> = const { RefCell::new(None) };
    static RESTORE: RefCell<Option<Restore>> = const { RefCell::new(None) };
}

/// Runs `f` on the snapshot in progress, if any, taken out of its slot meanwhile: whatever `f`
/// serializes sees no snapshot.
fn with_snapshot<R>(f: impl FnOnce(&mut Snapshot) -> R) -> Option<R> {
    let mut snapshot = SNAPSHOT.with(|slot| slot.borrow_mut().take())?;
    let result = f(&mut snapshot);
    SNAPSHOT.with(|slot| *slot.borrow_mut() = Some(snapshot));
    Some(result)
}

/// Whether a snapshot is being taken: types with a rescalable form write it.
pub(crate) fn snapshotting() -> bool {
    SNAPSHOT.with(|slot| slot.borrow().is_some())
}

/// Whether a rescalable snapshot is being restored.
pub(crate) fn restoring() -> bool {
    RESTORE.with(|slot| slot.borrow().is_some())
}

/// Runs `f` on the restore in progress, if any, taken out of its slot meanwhile.
fn with_restore<R>(f: impl FnOnce(&mut Restore) -> R) -> Option<R> {
    let mut restore = RESTORE.with(|slot| slot.borrow_mut().take())?;
    let result = f(&mut restore);
    RESTORE.with(|slot| *slot.borrow_mut() = Some(restore));
    Some(result)
}

/// Takes a snapshot of `state` (see the module docs): the rescalable layout if it holds a
/// `Keyed`, `ListState` or `UnionState`, otherwise its bincode. `capacity` is a guess of the
/// size; `timer_key_prefix` is how many bytes of the operator's timer keys come before the
/// record key (docs/ABI.md §16).
pub(crate) fn snapshot<T: Serialize>(
    state: &T,
    capacity: usize,
    timer_key_prefix: u8,
) -> Result<Vec<u8>> {
    SNAPSHOT.with(|slot| {
        *slot.borrow_mut() = Some(Snapshot {
            writer: Writer::with_capacity(timer_key_prefix, capacity),
            next: REST,
            scratch: Vec::new(),
        })
    });
    let mut rest = Vec::with_capacity(capacity);
    let encoded = encode_into(state, &mut rest);
    let snapshot = SNAPSHOT
        .with(|slot| slot.borrow_mut().take())
        .expect("the snapshot's slot is filled above");
    encoded?;
    if snapshot.next == REST {
        return Ok(rest);
    }
    let mut writer = snapshot.writer;
    writer.union(REST, &rest);
    Ok(writer.finish())
}

/// Restores a state from the bytes of a [`snapshot`], possibly split and merged from several
/// subtasks by the host.
pub(crate) fn restore<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    const HINT: &str = "was the snapshot taken by another version of the operator?";
    if !bytes.starts_with(&MAGIC) {
        let (state, read) =
            bincode::serde::decode_from_slice(bytes, bincode::config::standard())
                .map_err(|e| Error::msg(format!("snapshot does not decode ({HINT}): {e}")))?;
        if read != bytes.len() {
            let extra = bytes.len() - read;
            return Err(Error::msg(format!(
                "{extra} bytes follow the operator's state in the snapshot ({HINT})"
            )));
        }
        return Ok(state);
    }
    let layout = RescalableState::decode(bytes)
        .map_err(|e| Error::msg(format!("snapshot does not decode ({HINT}): {e}")))?
        .expect("the bytes start with the magic");
    let mut untaken = BTreeMap::new();
    let mut rest: Option<&[u8]> = None;
    for item in layout.items() {
        if (item.kind, item.state) == (ItemKind::Union, REST) {
            // Every old subtask's rest reaches every new one: they must agree.
            match rest {
                None => rest = Some(item.value),
                Some(first) if first == item.value => {}
                Some(_) => {
                    return Err(Error::msg(
                        "the subtasks this one is restored from differ in the operator's fields \
                         outside Keyed, ListState and UnionState, and a rescale gives each new \
                         subtask all of them: keep what differs between subtasks in a ListState \
                         (split on a rescale) or a UnionState (every subtask gets all)",
                    ));
                }
            }
            continue;
        }
        *untaken.entry((item.kind, item.state)).or_insert(0) += 1;
    }
    let rest = rest.ok_or_else(|| {
        Error::msg(format!(
            "the snapshot holds no operator fields, only keyed or list items ({HINT})"
        ))
    })?;
    let rest = rest.to_vec();
    RESTORE.with(|slot| {
        *slot.borrow_mut() = Some(Restore {
            bytes: bytes.to_vec(),
            untaken,
        })
    });
    let decoded = decode::<T>(&rest);
    let left = RESTORE
        .with(|slot| slot.borrow_mut().take())
        .expect("the restore's slot is filled above");
    let state = decoded?;
    if let Some(((kind, id), count)) = left.untaken.into_iter().next() {
        return Err(Error::msg(format!(
            "the snapshot holds {count} {kind:?} item(s) of state {id}, which this operator has \
             no field for ({HINT})"
        )));
    }
    Ok(state)
}

/// Appends the bincode of `value` to `out`.
fn encode_into<V: Serialize + ?Sized>(value: &V, out: &mut Vec<u8>) -> Result<()> {
    bincode::serde::encode_into_writer(value, VecWriter(out), bincode::config::standard())
        .map_err(|e| Error::msg(format!("cannot encode the operator's state: {e}")))
}

/// A bincode writer appending to a `Vec`.
struct VecWriter<'a>(&'a mut Vec<u8>);

impl bincode::enc::write::Writer for VecWriter<'_> {
    #[inline(always)]
    fn write(&mut self, bytes: &[u8]) -> core::result::Result<(), bincode::error::EncodeError> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

/// Decodes one bincode value that must take all of `bytes`.
fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    let (value, read) = bincode::serde::decode_from_slice(bytes, bincode::config::standard())
        .map_err(|e| Error::msg(format!("snapshot does not decode: {e}")))?;
    if read != bytes.len() {
        return Err(Error::msg(format!(
            "{} bytes follow a value in the snapshot",
            bytes.len() - read
        )));
    }
    Ok(value)
}

/// A key serialized as bytes (bincode: a length and the bytes, as a `Vec<u8>`).
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> core::result::Result<S::Ok, S::Error> {
        // As a sequence of u8, which is how serde writes a `Vec<u8>`.
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for b in self.0 {
            seq.serialize_element(b)?;
        }
        seq.end()
    }
}

/// Reads a map of byte keys into a container made by `with_capacity`, through `insert`.
struct MapVisitor<W, F, V> {
    with_capacity: W,
    insert: F,
    _value: PhantomData<V>,
}

impl<'de, C, W, F, V> Visitor<'de> for MapVisitor<W, F, V>
where
    W: FnOnce(usize) -> C,
    F: FnMut(&mut C, &[u8], V),
    V: DeserializeOwned,
{
    type Value = C;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map from byte keys to values")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> core::result::Result<C, A::Error> {
        let mut container = (self.with_capacity)(map.size_hint().unwrap_or(0));
        while let Some((key, value)) = map.next_entry::<Vec<u8>, V>()? {
            (self.insert)(&mut container, &key, value);
        }
        Ok(container)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _seq: A) -> core::result::Result<C, A::Error> {
        Err(serde::de::Error::custom("expected a map of keyed state"))
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::testing::{Harness, OwnedRecord, assert_rescale_preserves_output, record};
    use crate::{Batch, Context, Operator, Output, State};

    /// Counts records per key, the records per subtask in a list, and keeps its name.
    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    struct Counter {
        name: String,
        counts: Keyed<u64>,
        seen: ListState<u64>,
        notes: UnionState<String>,
    }

    impl Operator for Counter {
        fn init(ctx: &Context) -> Result<Self> {
            Ok(Counter {
                name: ctx.operator().to_string(),
                ..Counter::default()
            })
        }

        fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
            for record in input {
                let count = self.counts.entry(record.key.to_vec()).or_default();
                *count += 1;
                out.emit(record.key, count.to_string().as_bytes(), record.timestamp);
                match self.seen.first_mut() {
                    Some(seen) => *seen += 1,
                    None => self.seen.push(1),
                }
            }
            Ok(())
        }
    }

    fn input() -> Vec<OwnedRecord> {
        (0..400)
            .map(|i: i64| record(format!("key-{}", (i * 7) % 37), "", i))
            .collect()
    }

    #[test]
    fn a_snapshot_with_keyed_fields_is_rescalable_and_round_trips() {
        let mut counter = Counter {
            name: "c".into(),
            ..Counter::default()
        };
        counter.counts.insert(b"a".to_vec(), 3);
        counter.counts.insert(Vec::new(), 1);
        counter.seen.push(4);
        counter.notes.push("n".into());
        let bytes = counter.snapshot().unwrap();
        let layout = RescalableState::decode(&bytes).unwrap().unwrap();
        let kinds: Vec<ItemKind> = layout.items().map(|i| i.kind).collect();
        assert_eq!(kinds.iter().filter(|k| **k == ItemKind::Keyed).count(), 2);
        assert!(kinds.contains(&ItemKind::List) && kinds.contains(&ItemKind::Union));
        let mut back = Counter::default();
        back.restore(&bytes).unwrap();
        assert_eq!(back, counter);
    }

    #[test]
    fn outside_a_snapshot_keyed_state_is_a_map_as_a_hash_map_writes_it() {
        // So a snapshot taken before an operator moved to `Keyed` restores into it.
        #[derive(Serialize)]
        struct Before {
            name: String,
            counts: std::collections::BTreeMap<Vec<u8>, u64>,
            seen: Vec<u64>,
            notes: Vec<String>,
        }
        let before = Before {
            name: "c".into(),
            counts: [(b"k".to_vec(), 2)].into(),
            seen: vec![5],
            notes: Vec::new(),
        };
        let bytes = bincode::serde::encode_to_vec(&before, bincode::config::standard()).unwrap();
        let mut counter = Counter::default();
        counter.restore(&bytes).unwrap();
        assert_eq!(counter.counts.get(&b"k"[..]), Some(&2));
        assert_eq!(*counter.seen, [5]);
    }

    #[test]
    fn an_operator_without_keyed_fields_snapshots_as_plain_bincode() {
        #[derive(Serialize, Deserialize)]
        struct Plain {
            next: u64,
        }
        let bytes = Plain { next: 300 }.snapshot().unwrap();
        assert_eq!(
            bytes,
            bincode::serde::encode_to_vec(300u64, bincode::config::standard()).unwrap()
        );
    }

    #[test]
    fn rescaling_keeps_every_keys_output() {
        let ctx = Context::new("counter");
        for (from, to) in [(2, 3), (2, 1), (3, 4), (1, 2), (4, 2)] {
            assert_rescale_preserves_output::<Counter>(&ctx, &input(), from, to);
        }
    }

    #[test]
    fn list_state_is_split_and_union_state_given_to_all() -> Result<()> {
        let ctx = Context::new("counter");
        let mut old = Vec::new();
        for subtask in 0..2 {
            let mut h = Harness::<Counter>::new(ctx.clone().with_subtask(subtask, 2))?;
            h.push(format!("k{subtask}"), "", 1)?;
            old.push(h.checkpoint()?);
        }
        let new = Harness::<Counter>::rescale(&ctx, &old, 3, 128)?;
        let seen: Vec<u64> = new
            .iter()
            .flat_map(|h| h.operator().seen.0.clone())
            .collect();
        assert_eq!(
            seen,
            [1, 1],
            "each count of the list goes to one new subtask"
        );
        let merged = Harness::<Counter>::rescale(&ctx, &old, 1, 128)?;
        assert_eq!(*merged[0].operator().seen, [1, 1]);
        assert_eq!(merged[0].operator().counts.len(), 2);
        Ok(())
    }

    #[test]
    fn subtasks_that_differ_outside_their_state_types_cannot_be_merged() -> Result<()> {
        let mut old = Vec::new();
        for subtask in 0..2 {
            // Each subtask has another name: a field outside Keyed, ListState and UnionState.
            let ctx = Context::new(format!("counter-{subtask}")).with_subtask(subtask, 2);
            let mut h = Harness::<Counter>::new(ctx)?;
            h.push("k", "", 1)?;
            old.push(h.checkpoint()?);
        }
        let err = match Harness::<Counter>::rescale(&Context::new("c"), &old, 1, 128) {
            Ok(_) => panic!("two different names merged"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains("keep what differs between subtasks in a ListState"),
            "{err}"
        );
        Ok(())
    }

    #[test]
    fn an_opaque_state_cannot_be_rescaled() -> Result<()> {
        #[derive(Serialize, Deserialize)]
        struct Opaque {
            counts: std::collections::BTreeMap<Vec<u8>, u64>,
        }
        impl Operator for Opaque {
            fn init(_: &Context) -> Result<Self> {
                Ok(Opaque {
                    counts: Default::default(),
                })
            }
            fn process(&mut self, input: &Batch<'_>, _: &mut Output) -> Result<()> {
                for r in input {
                    *self.counts.entry(r.key.to_vec()).or_default() += 1;
                }
                Ok(())
            }
        }
        let mut h = Harness::<Opaque>::new(Context::new("o"))?;
        h.push("k", "", 1)?;
        let err = match Harness::<Opaque>::rescale(&Context::new("o"), &[h.checkpoint()?], 2, 128) {
            Ok(_) => panic!("an opaque state was split"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("not in the rescalable layout"), "{err}");
        Ok(())
    }
}
