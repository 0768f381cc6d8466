/* neonlike._hotpath: the statement's hot path in C.
 *
 * One statement such as `o[:] = be.tanh(s * 2.0 + 1.0) * s - s` makes five nodes and then runs
 * one compiled kernel; in Python the nodes cost ~0.85 us each (a frame, a frozen dict, the
 * structure's interning) and the way to the kernel ~1 us. Each piece here stands in front of the
 * Python function it copies (`__wrapped__`), which stays the definition: a piece handles the hot
 * case only (for a maker: operands that are Tensors, nodes made by build() or Python numbers, no
 * keywords) and hands every other call, unchanged, to that function, which checks, reports or
 * declines exactly as before. Nothing here raises an error of its own: a failure on the fast
 * path is cleared and the call goes to Python (a kernel's own error propagates as it would).
 *
 *   _hotpath.setup(OpTreeNode, OpDict, Tensor_, structs, new_sid, bcast, broadcast2, tensor_token,
 *                leaves_max)
 *   maker = _hotpath.Maker(op, swap, unary, python_make)   # a method: Operators.__add__ = maker
 *   be_fn = _hotpath.Maker(op, False, unary, python_fn, True)   # Backend.tanh(be, a, out=None)
 *   key, tensors = _hotpath.statement_key(op_dict, out)    # engine.statement_key, in C
 *   ran = _hotpath.run_fast(runners, out, tree)            # Engine.execute's fast path
 *   runner = _hotpath.FlatRunner(entries, n_consts, threshold, python_fast)   # cpu/program.py
 *   Tensor.__setitem__ = _hotpath.Setitem(python_setitem)  # `out[:] = tree` through the runners
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>

static PyTypeObject *NodeType, *OpDictType, *TensorBase;
static PyObject *Structs, *NewSid, *Bcast, *Broadcast2, *TensorToken, *Empty, *OneOne, *ConstTok;
static PyObject *s_shape, *s_op, *s_sid, *s_leaves, *s_consts, *s_token;
static Py_ssize_t LeavesMax = 512;
/* byte offsets of OpDict's slots sid, leaves, consts (its __slots__: read from their member
 * descriptors at setup), so a node's slots are read and written without attribute lookups */
static Py_ssize_t OffSid, OffLeaves, OffConsts;
#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* Set a slot that holds nothing yet (a new OpDict's). */
static void slot_init(PyObject *d, Py_ssize_t off, PyObject *v) {
    PyObject *old = SLOT(d, off);
    SLOT(d, off) = Py_NewRef(v);
    Py_XDECREF(old);
}

/* One operand, classified as optree's make does: shape (NULL for a number), structure token,
 * leaves and constants. */
typedef struct {
    PyObject *shape, *token, *leaves, *consts;  /* all new references */
} Operand;

static void operand_clear(Operand *o) {
    Py_CLEAR(o->shape); Py_CLEAR(o->token); Py_CLEAR(o->leaves); Py_CLEAR(o->consts);
}

/* 1: classified; 0: not a hot-path operand (the Python maker takes the call); -1: never (errors
 * are cleared and reported as 0). */
static int classify(PyObject *x, Operand *o) {
    PyTypeObject *t = Py_TYPE(x);
    o->shape = o->token = o->leaves = o->consts = NULL;
    if (t == NodeType) {
        PyObject *d = PyTuple_GET_ITEM(x, 0);
        if (!PyDict_Check(d)) return 0;
        PyObject *shape = PyDict_GetItemWithError(d, s_shape);
        if (shape == NULL) { PyErr_Clear(); return 0; }
        if (Py_TYPE(d) != OpDictType) return 0;
        PyObject *sid = SLOT(d, OffSid), *leaves = SLOT(d, OffLeaves), *consts = SLOT(d, OffConsts);
        if (sid == NULL || leaves == NULL || consts == NULL || !PyTuple_Check(leaves) ||
                !PyTuple_Check(consts))
            return 0;                  /* made without build(): no structure to extend */
        o->shape = Py_NewRef(shape);
        o->token = Py_NewRef(sid);
        o->leaves = Py_NewRef(leaves);
        o->consts = Py_NewRef(consts);
        return 1;
    }
    if (t == &PyFloat_Type || t == &PyLong_Type) {
        PyObject *f;
        if (t == &PyFloat_Type) {
            f = Py_NewRef(x);
        } else {
            double v = PyLong_AsDouble(x);
            if (v == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 0; }   /* overflow */
            f = PyFloat_FromDouble(v);
            if (f == NULL) { PyErr_Clear(); return 0; }
        }
        o->consts = PyTuple_Pack(1, f);
        Py_DECREF(f);
        if (o->consts == NULL) { PyErr_Clear(); return 0; }
        o->token = Py_NewRef(ConstTok);
        o->leaves = Py_NewRef(Empty);
        return 1;   /* shape stays NULL: a number */
    }
    if (PyType_IsSubtype(t, TensorBase)) {
        o->shape = PyObject_GetAttr(x, s_shape);
        if (o->shape == NULL) { PyErr_Clear(); return 0; }
        o->token = PyObject_GetAttr(x, s_token);
        if (o->token == NULL) {
            PyErr_Clear();
            o->token = PyObject_CallOneArg(TensorToken, x);
            if (o->token == NULL) { PyErr_Clear(); operand_clear(o); return 0; }
        }
        o->leaves = PyTuple_Pack(1, x);
        o->consts = Py_NewRef(Empty);
        if (o->leaves == NULL) { PyErr_Clear(); operand_clear(o); return 0; }
        return 1;
    }
    return 0;
}

/* `s or (1, 1)`: a number's shape (NULL) and an empty shape are (1, 1), as in make. */
static PyObject *or_one_one(PyObject *s) {
    if (s == NULL) return Py_NewRef(OneOne);
    int t = PyObject_IsTrue(s);
    if (t < 0) return NULL;
    return Py_NewRef(t ? s : OneOne);
}

/* a + b for two tuples, a itself where b is empty (as make's `la + lb if lb else la`). */
static PyObject *join(PyObject *a, PyObject *b) {
    if (PyTuple_GET_SIZE(b) == 0) return Py_NewRef(a);
    if (PyTuple_GET_SIZE(a) == 0) return Py_NewRef(b);
    return PySequence_Concat(a, b);
}

/* The broadcast shape of two operand shapes, through optree's memo (then its checked function). */
static PyObject *broadcast(PyObject *sa, PyObject *sb, PyObject *op) {
    PyObject *key = PyTuple_Pack(2, sa, sb);
    if (key == NULL) return NULL;
    PyObject *hit = PyDict_GetItemWithError(Bcast, key);
    Py_DECREF(key);
    if (hit != NULL) return Py_NewRef(hit);
    if (PyErr_Occurred()) return NULL;
    return PyObject_CallFunctionObjArgs(Broadcast2, sa, sb, op, NULL);
}

/* The node (op_dict, a, b) for classified operands; NULL (error set) on failure. */
static PyObject *make_node(PyObject *op, int unary, PyObject *a, PyObject *b, Operand *oa,
                           Operand *ob) {
    PyObject *shape = NULL, *leaves = NULL, *consts = NULL, *d = NULL, *node = NULL;
    PyObject *ka = oa->token, *kb = unary ? Py_False : ob->token;
    if (unary) {
        shape = or_one_one(oa->shape);
        if (shape == NULL) return NULL;
        leaves = Py_NewRef(oa->leaves);
        consts = Py_NewRef(oa->consts);
    } else {
        PyObject *sa = oa->shape, *sb = ob->shape;
        int same = 0;
        if (sa != NULL && sb != NULL) {
            same = sa == sb ? 1 : PyObject_RichCompareBool(sa, sb, Py_EQ);
            if (same < 0) return NULL;
        }
        if (same || sb == NULL) shape = or_one_one(sa);
        else if (sa == NULL) shape = Py_NewRef(sb);
        else shape = broadcast(sa, sb, op);
        if (shape == NULL) return NULL;
        leaves = join(oa->leaves, ob->leaves);
        consts = leaves ? join(oa->consts, ob->consts) : NULL;
        if (consts == NULL) goto fail;
    }
    d = PyDict_Type.tp_new(OpDictType, Empty, NULL);
    if (d == NULL || PyDict_SetItem(d, s_op, op) < 0 || PyDict_SetItem(d, s_shape, shape) < 0)
        goto fail;
    if (ka == Py_None || kb == Py_None ||
            PyTuple_GET_SIZE(leaves) + PyTuple_GET_SIZE(consts) > LeavesMax) {
        slot_init(d, OffSid, Py_None);
        slot_init(d, OffLeaves, Empty);
        slot_init(d, OffConsts, Empty);
    } else {
        slot_init(d, OffLeaves, leaves);
        slot_init(d, OffConsts, consts);
        PyObject *key = PyTuple_Pack(4, op, Py_None, ka, kb);
        if (key == NULL) goto fail;
        PyObject *sid = PyDict_GetItemWithError(Structs, key);
        if (sid != NULL) {
            Py_INCREF(sid);
        } else if (!PyErr_Occurred()) {
            sid = PyObject_CallOneArg(NewSid, key);    /* optree: intern a structure first seen */
        }
        Py_DECREF(key);
        if (sid == NULL) goto fail;
        slot_init(d, OffSid, sid);
        Py_DECREF(sid);
    }
    node = NodeType->tp_alloc(NodeType, 3);
    if (node == NULL) goto fail;
    PyTuple_SET_ITEM(node, 0, d);            /* steals d */
    PyTuple_SET_ITEM(node, 1, Py_NewRef(a));
    PyTuple_SET_ITEM(node, 2, Py_NewRef(b));
    d = NULL;
fail:
    Py_XDECREF(d); Py_XDECREF(shape); Py_XDECREF(leaves); Py_XDECREF(consts);
    return node;
}

typedef struct {
    PyObject_HEAD
    PyObject *op, *py, *name, *doc;
    int swap, unary, skip;
    vectorcallfunc vectorcall;
} Maker;

static PyObject *maker_vectorcall(PyObject *self_, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    Maker *self = (Maker *)self_;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf) - self->skip;   /* skip: a backend's method */
    if (NodeType == NULL || kwnames != NULL || n < 1 || n > 2 - self->skip * self->unary)
        return PyObject_Vectorcall(self->py, args, nargsf, kwnames);
    PyObject *x = args[self->skip], *y = n == 2 ? args[self->skip + 1] : Py_None;
    PyObject *a = self->swap ? y : x, *b = self->swap ? x : y;
    Operand oa, ob = {NULL, NULL, NULL, NULL};
    PyObject *node = NULL;
    if (!classify(a, &oa)) goto python;
    if (self->unary) {
        if (b != Py_None) { operand_clear(&oa); goto python; }
    } else if (!classify(b, &ob)) {
        operand_clear(&oa);
        goto python;
    }
    node = make_node(self->op, self->unary, a, b, &oa, &ob);
    operand_clear(&oa);
    operand_clear(&ob);
    if (node != NULL) return node;
    PyErr_Clear();
python:
    return PyObject_Vectorcall(self->py, args, nargsf, kwnames);
}

static PyObject *maker_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *op, *py;
    int swap, unary, skip = 0;
    if (!PyArg_ParseTuple(args, "OppO|p:Maker", &op, &swap, &unary, &py, &skip)) return NULL;
    Maker *self = (Maker *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->op = Py_NewRef(op);
    self->py = Py_NewRef(py);
    self->name = PyObject_GetAttrString(py, "__name__");
    self->doc = PyObject_GetAttrString(py, "__doc__");
    if (self->name == NULL || self->doc == NULL) { Py_DECREF(self); return NULL; }
    self->swap = swap;
    self->unary = unary;
    self->skip = skip;
    self->vectorcall = maker_vectorcall;
    return (PyObject *)self;
}

static int maker_traverse(Maker *self, visitproc visit, void *arg) {
    Py_VISIT(self->op); Py_VISIT(self->py); Py_VISIT(self->name); Py_VISIT(self->doc);
    return 0;
}

static int maker_clear(Maker *self) {
    Py_CLEAR(self->op); Py_CLEAR(self->py); Py_CLEAR(self->name); Py_CLEAR(self->doc);
    return 0;
}

static void maker_dealloc(Maker *self) {
    PyObject_GC_UnTrack(self);
    maker_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A method: `instance.__add__` is bound (Python functions are); `a + b` calls it unbound
 * (Py_TPFLAGS_METHOD_DESCRIPTOR), with no bound-method object made. */
static PyObject *maker_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *maker_repr(Maker *self) {
    return PyUnicode_FromFormat("<neonlike node maker %S>", self->name);
}

static PyMemberDef maker_members[] = {
    {"__name__", T_OBJECT, offsetof(Maker, name), 0, "the method's name"},
    {"__doc__", T_OBJECT, offsetof(Maker, doc), 0, "the Python function's docstring"},
    {"__wrapped__", T_OBJECT, offsetof(Maker, py), READONLY, "the Python maker (fallback)"},
    {"op", T_OBJECT, offsetof(Maker, op), READONLY, "the node's op"},
    {NULL}
};

static PyTypeObject MakerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "neonlike._hotpath.Maker",
    .tp_basicsize = sizeof(Maker),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "Maker(op, swap, unary, python_make, skip=False): optree's elementwise node maker "
              "in C; skip: a backend method `fn(be, a[, b])` whose first argument is not an operand",
    .tp_new = maker_new,
    .tp_dealloc = (destructor)maker_dealloc,
    .tp_traverse = (traverseproc)maker_traverse,
    .tp_clear = (inquiry)maker_clear,
    .tp_vectorcall_offset = offsetof(Maker, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = maker_get,
    .tp_repr = (reprfunc)maker_repr,
    .tp_members = maker_members,
};

/* engine.statement_key(d, out): the fast key of `out[:] = tree` and the tree's distinct tensors,
 * from the leaves the tree's root op dict `d` carries (see engine.py for the meaning); None where
 * the tree has no structure id (or `d` is not an OpDict), NotImplemented where the Python function should answer (more
 * leaves than are worth comparing pairwise). Tensors are compared by identity, as the Python
 * function's dict does. */
#define KEY_LEAVES_MAX 32

static PyObject *key_of(PyObject *d, PyObject *out) {
    PyObject *sid, *leaves, *result = NULL;
    if (Py_TYPE(d) == OpDictType) {
        sid = SLOT(d, OffSid);
        leaves = SLOT(d, OffLeaves);
        if (sid == NULL || sid == Py_None || leaves == NULL) Py_RETURN_NONE;
        Py_INCREF(sid);
        Py_INCREF(leaves);
    } else {
        sid = PyObject_GetAttr(d, s_sid);
        if (sid == NULL) {          /* an op dict not made by build(): no structure */
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (sid == Py_None) return sid;
        leaves = PyObject_GetAttr(d, s_leaves);
        if (leaves == NULL) goto done;
    }
    Py_ssize_t n = PyTuple_Check(leaves) ? PyTuple_GET_SIZE(leaves) : -1, distinct = 0, slot = -1;
    if (n > KEY_LEAVES_MAX || n <= 0) { result = Py_NewRef(Py_NotImplemented); goto done; }
    PyObject *first[KEY_LEAVES_MAX];
    Py_ssize_t slots[KEY_LEAVES_MAX];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(leaves, i);
        Py_ssize_t j = 0;
        while (j < distinct && first[j] != x) j++;
        if (j == distinct) {
            first[distinct++] = x;
            if (x == out) slot = j;
        }
        slots[i] = j;
    }
    PyObject *pattern, *tensors;
    if (distinct == n) {
        pattern = Py_NewRef(Py_None);
        tensors = Py_NewRef(leaves);
    } else if (distinct == 1) {
        pattern = PyLong_FromLong(0);
        tensors = PyTuple_GetSlice(leaves, 0, 1);
    } else {
        pattern = PyTuple_New(n);
        tensors = PyTuple_New(distinct);
        if (pattern && tensors) {
            for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *v = PyLong_FromSsize_t(slots[i]);
                if (v == NULL) { Py_CLEAR(pattern); break; }
                PyTuple_SET_ITEM(pattern, i, v);
            }
            for (Py_ssize_t j = 0; j < distinct; j++)
                PyTuple_SET_ITEM(tensors, j, Py_NewRef(first[j]));
        }
    }
    PyObject *token = NULL, *slot_obj = NULL, *key = NULL;
    if (pattern == NULL || tensors == NULL) goto fail;
    token = PyObject_GetAttr(out, s_token);
    if (token == NULL) {
        PyErr_Clear();
        token = PyObject_CallOneArg(TensorToken, out);
        if (token == NULL) goto fail;
    }
    slot_obj = PyLong_FromSsize_t(slot);
    if (slot_obj == NULL) goto fail;
    key = PyTuple_Pack(4, sid, pattern, slot_obj, token);
    if (key != NULL) result = PyTuple_Pack(2, key, tensors);
fail:
    Py_XDECREF(pattern); Py_XDECREF(tensors); Py_XDECREF(token); Py_XDECREF(slot_obj);
    Py_XDECREF(key);
done:
    Py_DECREF(sid);
    Py_XDECREF(leaves);
    return result;
}

static PyObject *statement_key(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "statement_key(op_dict, out) takes 2 arguments");
        return NULL;
    }
    return key_of(args[0], args[1]);
}

/* 1 where the runner filed under the statement's key ran it, 0 where the caller must go on (no
 * key, no runner yet, or the runner declined), 2 where the key is statement_key's to make (more
 * leaves than key_of compares), -1 on an error (the runner's own). */
static int run_fast_impl(PyObject *runners, PyObject *out, PyObject *tree) {
    if (Py_TYPE(tree) != NodeType) return 0;
    PyObject *d = PyTuple_GET_ITEM(tree, 0);
    PyObject *found = key_of(d, out);
    if (found == NULL) return -1;
    if (!PyTuple_Check(found)) {
        int python = found == Py_NotImplemented;
        Py_DECREF(found);
        return python ? 2 : 0;
    }
    PyObject *runner = PyDict_GetItemWithError(runners, PyTuple_GET_ITEM(found, 0));
    if (runner == NULL) {
        Py_DECREF(found);
        return PyErr_Occurred() ? -1 : 0;
    }
    Py_INCREF(runner);
    PyObject *consts = Py_TYPE(d) == OpDictType ? Py_XNewRef(SLOT(d, OffConsts))
                                                : PyObject_GetAttr(d, s_consts), *r = NULL;
    if (consts == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_AttributeError, "consts");
    if (consts != NULL) {
        PyObject *call[3] = {out, PyTuple_GET_ITEM(found, 1), consts};
        r = PyObject_Vectorcall(runner, call, 3, NULL);
        Py_DECREF(consts);
    }
    Py_DECREF(runner);
    Py_DECREF(found);
    if (r == NULL) return -1;
    int ok = PyObject_IsTrue(r);
    Py_DECREF(r);
    return ok;
}

/* engine.Engine.execute's fast path: run_fast(runners, out, tree) looks up the statement's
 * runner by its key (statement_key) and calls runner(out, tensors, consts); True where it ran,
 * False where the engine must go on (no key, no runner yet, or the runner declined),
 * NotImplemented where statement_key must make the key and the engine try the runner. */
static PyObject *run_fast(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "run_fast(runners: dict, out, tree) takes 3 arguments");
        return NULL;
    }
    int ok = run_fast_impl(args[0], args[1], args[2]);
    if (ok < 0) return NULL;
    if (ok == 2) Py_RETURN_NOTIMPLEMENTED;
    return PyBool_FromLong(ok);
}

/* Tensor.__setitem__'s statement `out[:] = tree` (the tree of out's shape) in C: where the
 * tensor's backend names its engine's runners (`backend._runners`, a dict) and one of them runs
 * the statement, that is all; every other call goes, unchanged, to the Python __setitem__ it
 * wraps. A method like Maker (Py_TPFLAGS_METHOD_DESCRIPTOR). */
typedef struct {
    PyObject_HEAD
    PyObject *py;
    vectorcallfunc vectorcall;
} Setitem;

static PyObject *s_backend, *s_runners;

static int whole_slice(PyObject *key) {
    if (Py_TYPE(key) != &PySlice_Type) return 0;
    PySliceObject *k = (PySliceObject *)key;
    return k->start == Py_None && k->stop == Py_None && k->step == Py_None;
}

static PyObject *setitem_vectorcall(PyObject *self_, PyObject *const *args, size_t nargsf,
                                    PyObject *kwnames) {
    Setitem *self = (Setitem *)self_;
    if (NodeType != NULL && kwnames == NULL && PyVectorcall_NARGS(nargsf) == 3 &&
            whole_slice(args[1]) && Py_TYPE(args[2]) == NodeType) {
        PyObject *out = args[0], *d = PyTuple_GET_ITEM(args[2], 0), *backend = NULL;
        PyObject *runners = NULL, *oshape = NULL;
        PyObject *shape = PyDict_Check(d) ? PyDict_GetItemWithError(d, s_shape) : NULL;
        int ran = 0;
        if (shape != NULL && (oshape = PyObject_GetAttr(out, s_shape)) != NULL &&
                (oshape == shape || PyObject_RichCompareBool(oshape, shape, Py_EQ) == 1) &&
                (backend = PyObject_GetAttr(out, s_backend)) != NULL &&
                (runners = PyObject_GetAttr(backend, s_runners)) != NULL && PyDict_Check(runners))
            ran = run_fast_impl(runners, out, args[2]);     /* -1: the runner's (kernel's) error */
        else
            PyErr_Clear();       /* a lookup that failed: the Python method takes the call */
        Py_XDECREF(oshape); Py_XDECREF(backend); Py_XDECREF(runners);
        if (ran < 0) return NULL;
        if (ran == 1) Py_RETURN_NONE;
    }
    return PyObject_Vectorcall(self->py, args, nargsf, kwnames);
}

static PyObject *setitem_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *py;
    if (!PyArg_ParseTuple(args, "O:Setitem", &py)) return NULL;
    Setitem *self = (Setitem *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->py = Py_NewRef(py);
    self->vectorcall = setitem_vectorcall;
    return (PyObject *)self;
}

static int setitem_traverse(Setitem *self, visitproc visit, void *arg) {
    Py_VISIT(self->py);
    return 0;
}

static int setitem_clear(Setitem *self) {
    Py_CLEAR(self->py);
    return 0;
}

static void setitem_dealloc(Setitem *self) {
    PyObject_GC_UnTrack(self);
    setitem_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef setitem_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(Setitem, py), READONLY, "the Python __setitem__"},
    {NULL}
};

static PyObject *setitem_getattro(PyObject *self, PyObject *name) {
    /* __doc__ and __name__ are the Python method's (help(Tensor.__setitem__) reads it) */
    PyObject *r = PyObject_GenericGetAttr(self, name);
    if (r == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        r = PyObject_GetAttr(((Setitem *)self)->py, name);
    }
    return r;
}

static PyTypeObject SetitemType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "neonlike._hotpath.Setitem",
    .tp_basicsize = sizeof(Setitem),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "Setitem(python_setitem): Tensor.__setitem__ with its statement's fast path in C",
    .tp_new = setitem_new,
    .tp_dealloc = (destructor)setitem_dealloc,
    .tp_traverse = (traverseproc)setitem_traverse,
    .tp_clear = (inquiry)setitem_clear,
    .tp_vectorcall_offset = offsetof(Setitem, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = maker_get,
    .tp_getattro = setitem_getattro,
    .tp_members = setitem_members,
};

/* cpu/program.py's fast runner for one fused flat stage, its common case in C: every buffer
 * plain (aligned, writeable, C-contiguous: the flat 1-D view) and apart from the output's memory,
 * the compiled entry point known. runner(out, tensors, consts) calls
 * entry(out_flat, out.shape, *flats, *consts) and answers True; any other case goes, unchanged,
 * to the Python runner it wraps. A tensor's `_hinfo` is program.py's memo
 * (array, root id, flat view or None, plain). */
#define RUNNER_ARGS_MAX 64

typedef struct {
    PyObject_HEAD
    PyObject *entries, *py;
    Py_ssize_t n_consts, threshold;
    vectorcallfunc vectorcall;
} FlatRunner;

static PyObject *s_hinfo;

/* The memo of a buffer that is plain (a new reference), NULL where it is not (or has none). */
static PyObject *plain_info(PyObject *t) {
    PyObject *info = PyObject_GetAttr(t, s_hinfo);
    if (info == NULL) { PyErr_Clear(); return NULL; }
    if (PyTuple_Check(info) && PyTuple_GET_SIZE(info) == 4 && PyTuple_GET_ITEM(info, 3) == Py_True
            && PyTuple_GET_ITEM(info, 2) != Py_None)
        return info;
    Py_DECREF(info);
    return NULL;
}

static PyObject *runner_vectorcall(PyObject *self_, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
    FlatRunner *self = (FlatRunner *)self_;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), held = 0;
    PyObject *infos[RUNNER_ARGS_MAX], *call[RUNNER_ARGS_MAX], *shape = NULL;
    if (kwnames != NULL || nargs != 3 || !(PyTuple_Check(args[1]) || PyList_Check(args[1])) ||
            !(PyTuple_Check(args[2]) || PyList_Check(args[2])))
        goto python;          /* tensors and consts: tuples (the fast key's) or lists (a walk's) */
    PyObject *out = args[0], *tensors = args[1], *consts = args[2];
    Py_ssize_t nt = PySequence_Fast_GET_SIZE(tensors), nc = PySequence_Fast_GET_SIZE(consts);
    if (nc != self->n_consts || nt + nc + 2 > RUNNER_ARGS_MAX) goto python;
    for (Py_ssize_t i = -1; i < nt; i++) {     /* -1: the output */
        PyObject *info = plain_info(i < 0 ? out : PySequence_Fast_GET_ITEM(tensors, i));
        if (info == NULL) goto python;
        infos[held++] = info;
        call[i < 0 ? 0 : 2 + i] = PyTuple_GET_ITEM(info, 2);
        if (i >= 0) {                          /* memory shared with the output: Python checks */
            int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(info, 1),
                                                PyTuple_GET_ITEM(infos[0], 1), Py_EQ);
            if (same != 0) { PyErr_Clear(); goto python; }
        }
    }
    Py_ssize_t size = PyObject_Size(call[0]);
    if (size <= 0) { PyErr_Clear(); goto python; }
    PyObject *entry = PyList_GET_ITEM(self->entries, size >= self->threshold);
    if (entry == Py_None || entry == Py_False) goto python;
    for (Py_ssize_t i = 0; i < nc; i++) call[2 + nt + i] = PySequence_Fast_GET_ITEM(consts, i);
    shape = PyObject_GetAttr(out, s_shape);
    if (shape == NULL) { PyErr_Clear(); goto python; }
    call[1] = shape;
    Py_INCREF(entry);
    PyObject *r = PyObject_Vectorcall(entry, call, 2 + nt + nc, NULL);
    Py_DECREF(entry);
    Py_DECREF(shape);
    while (held) Py_DECREF(infos[--held]);
    if (r == NULL) return NULL;       /* the kernel's own error: as the Python runner raises it */
    Py_DECREF(r);
    Py_RETURN_TRUE;
python:
    while (held) Py_DECREF(infos[--held]);
    return PyObject_Vectorcall(self->py, args, nargsf, kwnames);
}

static PyObject *runner_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *entries, *py;
    Py_ssize_t n_consts, threshold;
    if (!PyArg_ParseTuple(args, "O!nnO:FlatRunner", &PyList_Type, &entries, &n_consts, &threshold,
                          &py))
        return NULL;
    if (PyList_GET_SIZE(entries) != 2) {
        PyErr_SetString(PyExc_ValueError, "FlatRunner: entries must be the list [serial, parallel]");
        return NULL;
    }
    FlatRunner *self = (FlatRunner *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->entries = Py_NewRef(entries);
    self->py = Py_NewRef(py);
    self->n_consts = n_consts;
    self->threshold = threshold;
    self->vectorcall = runner_vectorcall;
    return (PyObject *)self;
}

static int runner_traverse(FlatRunner *self, visitproc visit, void *arg) {
    Py_VISIT(self->entries); Py_VISIT(self->py);
    return 0;
}

static int runner_clear(FlatRunner *self) {
    Py_CLEAR(self->entries); Py_CLEAR(self->py);
    return 0;
}

static void runner_dealloc(FlatRunner *self) {
    PyObject_GC_UnTrack(self);
    runner_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef runner_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(FlatRunner, py), READONLY, "the Python runner"},
    {"entries", T_OBJECT, offsetof(FlatRunner, entries), READONLY,
     "[serial, parallel] entry points (None: not known yet, False: none)"},
    {NULL}
};

static PyTypeObject FlatRunnerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "neonlike._hotpath.FlatRunner",
    .tp_basicsize = sizeof(FlatRunner),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "FlatRunner(entries, n_consts, threshold, python_fast): a fused flat stage's "
              "runner, its common case in C",
    .tp_new = runner_new,
    .tp_dealloc = (destructor)runner_dealloc,
    .tp_traverse = (traverseproc)runner_traverse,
    .tp_clear = (inquiry)runner_clear,
    .tp_vectorcall_offset = offsetof(FlatRunner, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_members = runner_members,
};

static PyObject *setup(PyObject *module, PyObject *args) {
    PyObject *node, *opdict, *tensor, *structs, *new_sid, *bcast, *broadcast2, *token;
    Py_ssize_t leaves_max;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OO!OOn:setup", &PyType_Type, &node, &PyType_Type, &opdict,
                          &PyType_Type, &tensor, &PyDict_Type, &structs, &new_sid, &PyDict_Type,
                          &bcast, &broadcast2, &token, &leaves_max))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)node, &PyTuple_Type) ||
            !PyType_IsSubtype((PyTypeObject *)opdict, &PyDict_Type)) {
        PyErr_SetString(PyExc_TypeError, "setup: the node type must be a tuple subclass and the op "
                        "dict type a dict subclass");
        return NULL;
    }
    Py_ssize_t offs[3];
    const char *names[3] = {"sid", "leaves", "consts"};
    for (int i = 0; i < 3; i++) {
        PyObject *desc = PyDict_GetItemString(((PyTypeObject *)opdict)->tp_dict, names[i]);
        if (desc == NULL || Py_TYPE(desc) != &PyMemberDescr_Type ||
                ((PyMemberDescrObject *)desc)->d_member->type != T_OBJECT_EX) {
            PyErr_Format(PyExc_TypeError, "setup: the op dict type must have a __slots__ entry "
                         "%s", names[i]);
            return NULL;
        }
        offs[i] = ((PyMemberDescrObject *)desc)->d_member->offset;
    }
    OffSid = offs[0]; OffLeaves = offs[1]; OffConsts = offs[2];
    Py_XSETREF(NodeType, (PyTypeObject *)Py_NewRef(node));
    Py_XSETREF(OpDictType, (PyTypeObject *)Py_NewRef(opdict));
    Py_XSETREF(TensorBase, (PyTypeObject *)Py_NewRef(tensor));
    Py_XSETREF(Structs, Py_NewRef(structs));
    Py_XSETREF(NewSid, Py_NewRef(new_sid));
    Py_XSETREF(Bcast, Py_NewRef(bcast));
    Py_XSETREF(Broadcast2, Py_NewRef(broadcast2));
    Py_XSETREF(TensorToken, Py_NewRef(token));
    LeavesMax = leaves_max;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "setup(OpTreeNode, OpDict, Tensor_, structs, new_sid, bcast, "
     "broadcast2, tensor_token, leaves_max): the types and tables of neonlike.optree"},
    {"statement_key", (PyCFunction)(void (*)(void))statement_key, METH_FASTCALL,
     "statement_key(op_dict, out) -> (key, tensors) | None | NotImplemented: engine.statement_key"},
    {"run_fast", (PyCFunction)(void (*)(void))run_fast, METH_FASTCALL,
     "run_fast(runners, out, tree) -> bool: Engine.execute's fast path"},
    {NULL}
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "neonlike._hotpath",
    "optree's elementwise node maker in C (see optree.elementwise_maker)", -1, methods,
};

PyMODINIT_FUNC PyInit__hotpath(void) {
    if (PyType_Ready(&MakerType) < 0 || PyType_Ready(&FlatRunnerType) < 0 ||
            PyType_Ready(&SetitemType) < 0)
        return NULL;
    s_hinfo = PyUnicode_InternFromString("_hinfo");
    s_backend = PyUnicode_InternFromString("backend");
    s_runners = PyUnicode_InternFromString("_runners");
    if (!s_hinfo || !s_backend || !s_runners) return NULL;
    Empty = PyTuple_New(0);
    OneOne = Py_BuildValue("(ii)", 1, 1);
    ConstTok = PyUnicode_InternFromString("c");
    s_shape = PyUnicode_InternFromString("shape");
    s_op = PyUnicode_InternFromString("op");
    s_sid = PyUnicode_InternFromString("sid");
    s_leaves = PyUnicode_InternFromString("leaves");
    s_consts = PyUnicode_InternFromString("consts");
    s_token = PyUnicode_InternFromString("_token");
    if (!Empty || !OneOne || !ConstTok || !s_shape || !s_op || !s_sid || !s_leaves || !s_consts ||
            !s_token)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Maker", (PyObject *)&MakerType) < 0 ||
            PyModule_AddObjectRef(m, "FlatRunner", (PyObject *)&FlatRunnerType) < 0 ||
            PyModule_AddObjectRef(m, "Setitem", (PyObject *)&SetitemType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
